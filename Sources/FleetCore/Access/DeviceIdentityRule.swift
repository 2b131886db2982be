/// The form every device id keeps to, whatever its source: ids are typed in shells, named in
/// file paths and logs, and a prefix tells whose rule made them (device-model.md, "Stable
/// device ids"). V4L2 and synthetic ids are made here; a third party's camera
/// (`SourceKind.external`) names its own and is held to the same form.
public enum DeviceIdentityRule {
    public static let maxLength = 128
    /// Prefixes that belong to one kind of source: nothing else may claim them.
    public static let reservedPrefixes: [(prefix: String, kind: SourceKind)] = [
        ("v4l2-", .v4l2), ("syn-", .synthetic), ("sen-", .sensor), ("synmic-", .syntheticMicrophone), ("alsa-", .alsa),
        ("genicam-", .genicam),
    ]

    /// Why `deviceID` may not name a device of `kind`, or nil when it may.
    public static func problem(with deviceID: String, kind: SourceKind) -> String? {
        guard !deviceID.isEmpty else { return "a device id must not be empty" }
        guard deviceID.utf8.count <= maxLength else {
            return "device id \(deviceID.prefix(40))… is \(deviceID.utf8.count) bytes long; at most \(maxLength)"
        }
        if let bad = deviceID.unicodeScalars.first(where: { !isAllowed($0) }) {
            return "device id \(deviceID) holds \"\(bad)\"; device ids use only A-Z a-z 0-9 . _ -"
        }
        guard deviceID.first != "-", deviceID.first != "." else {
            return "device id \(deviceID) starts with \"\(deviceID.first!)\"; it must start with a letter, digit or _"
        }
        for reserved in reservedPrefixes where deviceID.hasPrefix(reserved.prefix) && reserved.kind != kind {
            return "device id \(deviceID) starts with \(reserved.prefix), which only \(reserved.kind.rawValue) devices use"
        }
        return nil
    }

    private static func isAllowed(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "A"..."Z", "a"..."z", "0"..."9", ".", "_", "-": true
        default: false
        }
    }
}
