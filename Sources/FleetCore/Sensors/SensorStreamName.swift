/// A sensor stream's name (sensors.md): the last part of its telemetry topic
/// (`data.<node>.<stream>`) and of its device id, typed in shells and settings files.
public enum SensorStreamName {
    public static let maxLength = 32

    /// Why `name` cannot name a stream, or nil when it can.
    public static func problem(with name: String) -> String? {
        guard !name.isEmpty else { return "a sensor stream's name must not be empty" }
        guard name.utf8.count <= maxLength else { return "sensor stream name \(name.prefix(40)) is longer than \(maxLength) bytes" }
        guard let first = name.unicodeScalars.first, isLowercaseOrDigit(first) else {
            return "sensor stream name \(name) must start with a-z or 0-9"
        }
        if let bad = name.unicodeScalars.first(where: { !isLowercaseOrDigit($0) && $0 != "_" && $0 != "-" }) {
            return "sensor stream name \(name) holds \"\(bad)\"; names use only a-z 0-9 _ -"
        }
        return nil
    }

    /// The stream's device id on the node whose short id (the first 8 hex digits of its node
    /// id, as in `syn-` ids) is `nodeShortID`.
    public static func deviceID(nodeShortID: String, stream: String) -> String { "sen-\(nodeShortID)-\(stream)" }

    private static func isLowercaseOrDigit(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "a"..."z", "0"..."9": true
        default: false
        }
    }
}
