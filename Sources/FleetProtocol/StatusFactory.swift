extension Capfleet_V1_Status {
    public static let ok = Capfleet_V1_Status.with { $0.code = .ok }

    public static func failure(_ code: Capfleet_V1_StatusCode, _ reason: String) -> Capfleet_V1_Status {
        .with {
            $0.code = code
            $0.reason = reason
        }
    }

    public var isOK: Bool { code == .ok }
}
