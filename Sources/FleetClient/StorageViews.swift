import FleetProtocol
import Foundation

/// How the CLI shows storage destinations (recordings.md, "Offload"): secrets by name only.
public enum StorageViews {
    public struct Destination: Encodable, Sendable {
        let name, backend, root, createdBy: String
        let options: [String: String]
        let secretKeys, secretsMissing: [String]
        let createdUnixMs: Int64
        let offloadWhenStopped: Bool
        let offloadDailyAt: String

        enum CodingKeys: String, CodingKey {
            case name, backend, root, options, offloadWhenStopped = "offload_when_stopped", offloadDailyAt = "offload_daily_at"
            case createdBy = "created_by", secretKeys = "secret_keys", secretsMissing = "secrets_missing", createdUnixMs = "created_unix_ms"
        }

        public init(_ info: Capfleet_V1_StorageInfo) {
            name = info.destination.name
            backend = info.destination.backend
            root = info.destination.root
            options = info.destination.options
            secretKeys = info.secretKeys
            secretsMissing = info.secretsMissing
            createdBy = info.createdBy
            createdUnixMs = info.createdUnixMs
            offloadWhenStopped = info.destination.offloadWhenStopped
            offloadDailyAt = info.destination.offloadDailyAt
        }
    }

    /// `nas  webdav url=https://nas/dav user=capture  secrets: pass  takes under takes/`.
    public static func summary(_ info: Capfleet_V1_StorageInfo) -> String {
        let destination = info.destination
        var text = "\(destination.name)  \(destination.backend)"
        let settings = destination.options.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        if !settings.isEmpty { text += " " + settings.joined(separator: " ") }
        if !info.secretKeys.isEmpty { text += "  secrets: " + info.secretKeys.sorted().joined(separator: ", ") }
        if !info.secretsMissing.isEmpty {
            text += " (not held: \(info.secretsMissing.joined(separator: ", ")); add it again with them)"
        }
        return text + "  takes under \(destination.root.isEmpty ? "its top" : destination.root + "/")"
            + (destination.offloadWhenStopped ? "; every take offloaded once stored" : "")
            + (destination.offloadDailyAt.isEmpty ? "" : "; every take not yet there offloaded daily at \(destination.offloadDailyAt)")
    }
}
