/// Where a take's files go on a storage destination (recordings.md, "Offload"): one folder
/// per take, one per camera in it, each segment under its own file name, and beside the
/// cameras the take's index and sync report as JSON, so that tools downstream find the files
/// without the coordinator:
///
///     ROOT/TAKE_ID/take.json
///     ROOT/TAKE_ID/sync-report.json
///     ROOT/TAKE_ID/DEVICE_ID/SEGMENT_FILE
///
/// Identifiers become path names only through `component`, so that none climbs out of its
/// folder or names another's.
public struct OffloadLayout: Sendable, Equatable {
    /// The destination's folder for the fleet's takes ("" for its top).
    public let root: String

    public init(root: String) {
        self.root = root.split(separator: "/").filter { $0 != "." && $0 != ".." }.joined(separator: "/")
    }

    public func takeFolder(_ takeID: String) -> String { join(Self.component(takeID)) }

    public func segment(takeID: String, deviceID: String, fileName: String) -> String {
        join(Self.component(takeID), Self.component(deviceID), Self.component(fileName))
    }

    public func takeIndex(_ takeID: String) -> String { join(Self.component(takeID), "take.json") }

    public func syncReport(_ takeID: String) -> String { join(Self.component(takeID), "sync-report.json") }

    private func join(_ parts: String...) -> String { ([root].filter { !$0.isEmpty } + parts).joined(separator: "/") }

    /// A name safe as one path component: letters, digits, '-', '_' and '.' kept, anything
    /// else '_', and never "", "." or "..".
    public static func component(_ name: String) -> String {
        let kept = String(
            name.unicodeScalars.map { scalar -> Character in
                let allowed =
                    (scalar.value < 128) && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "-_.".unicodeScalars.contains(scalar))
                return allowed ? Character(scalar) : "_"
            })
        return kept.isEmpty || kept.allSatisfy { $0 == "." } ? "_" + kept : kept
    }
}
