import FleetClient
import FleetProtocol

extension OperatorClient {
    /// Grants a benchmark camera's consent: its pictures are test patterns, no one's likeness,
    /// and a camera without consent sends black frames, cheaper than its own.
    func grantTestPatternConsent(_ device: String) throws {
        _ = try call(
            .changeConsent(
                .with {
                    $0.deviceID = device
                    $0.action = .grant
                    $0.reason = "benchmark: a test pattern"
                }))
    }
}
