import FleetCore
import FleetSystem
import Foundation
import Glibc

/// Drops by reason, as the manifest writes them.
struct ManifestDrops: Codable, Sendable, Equatable {
    var late: UInt64 = 0
    var outOfBuffers: UInt64 = 0
    var discontinuity: UInt64 = 0
    var encoderLate: UInt64? = nil

    init(_ tally: DropTally = DropTally()) {
        late = tally.late
        outOfBuffers = tally.outOfBuffers
        discontinuity = tally.discontinuity
        encoderLate = tally.encoderLate
    }

    var tally: DropTally { DropTally(late: late, outOfBuffers: outOfBuffers, discontinuity: discontinuity, encoderLate: encoderLate ?? 0) }
}

/// What a part holds so far (record.proto's PartTally).
struct ManifestTally: Codable, Sendable, Equatable {
    var pixelFormat = ""
    var width = 0
    var height = 0
    var frameRate = 0.0
    var firstFleetNs: UInt64?
    var lastFleetNs: UInt64?
    var firstSequence: UInt64?
    var lastSequence: UInt64?
    var frames: UInt64 = 0
    var bytes: Int64 = 0
    var drops = ManifestDrops()
    /// Encoded parts: the encoder and the camera's format (absent in manifests before 1.4).
    var encoder: String? = nil
    var sourcePixelFormat: String? = nil
    /// As recorded (absent in manifests before 1.21, and for 8-bit parts that declare nothing).
    var bitDepth: Int? = nil
    var colour: String? = nil
    var depthUnitMetres: Double? = nil
}

/// One segment file of the part, and how far the coordinator knows of it.
struct ManifestSegment: Codable, Sendable, Equatable {
    enum State: String, Codable, Sendable { case open, finished, repaired }
    var number: Int
    var path: String
    var state: State
    var sizeBytes: Int64 = 0
    /// Empty until the hasher has read the finished file.
    var sha256 = ""
    var frames: UInt64 = 0
    var firstFleetNs: UInt64?
    var lastFleetNs: UInt64?
    var firstSequence: UInt64?
    var lastSequence: UInt64?
    var drops = ManifestDrops()
    /// The part's tally as of this segment's end (what the index applies with it).
    var tally = ManifestTally()
    var closedUnixMs: Int64?
    /// The coordinator's index holds it.
    var indexed = false
    /// The coordinator holds a verified copy: retention may remove the file.
    var collected = false
    /// Storage destinations holding a proved copy (recordings.md, "Offloading a take"):
    /// retention may remove the file. Absent in manifests written before 1.26.
    var offloadedTo: [String]?

    /// Safe elsewhere: on the coordinator or on a storage destination.
    var isSafeElsewhere: Bool { collected || !(offloadedTo ?? []).isEmpty }

    /// Finished (or repaired) and checksummed: what may be reported.
    var isReportable: Bool { state != .open && !sha256.isEmpty }
}

/// How the part ended, once it has.
struct ManifestEnd: Codable, Sendable, Equatable {
    var reason: String
    var failed: Bool
    var endedUnixMs: Int64
    /// The coordinator's index holds the end: nothing of the part is left to report.
    var acknowledged = false
}

/// The agent's own index of one device's part of a take (`part.json` beside its segments):
/// what a restarted agent goes on from, what is still to be reported to the coordinator (the
/// outbox: every segment not yet `indexed`, the end not yet `acknowledged`), and what collect,
/// verify and retention work from. Replaced atomically (a temporary file renamed over it, after
/// fsync), so a crash leaves the old one or the new one, never half of one.
struct AgentPartManifest: Codable, Sendable, Equatable {
    var takeID: String
    var deviceID: String
    var title: String
    var startFleetNs: UInt64
    var stopFleetNs: UInt64?
    var segmentSeconds: Int
    var createdUnixMs: Int64
    var segments: [ManifestSegment] = []
    var end: ManifestEnd?
    /// The take's numbering = the device's sequence + this (wrapping): rebased when a new agent
    /// process goes on with the part, so sequence numbers keep rising.
    var sequenceOffset: UInt64 = 0
    /// The agent process that last wrote the part.
    var agentInstance = ""

    var lastTally: ManifestTally? { segments.last(where: { $0.state != .open })?.tally }
    var bytesOnDisk: Int64 { segments.reduce(0) { $0 + $1.sizeBytes } }
    var isSettled: Bool { end?.acknowledged == true }

    static let fileName = "part.json"

    static func load(path: String) throws -> AgentPartManifest {
        try JSONDecoder().decode(AgentPartManifest.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// Writes the manifest to `path` atomically and durably.
    func save(path: String) throws(ManifestError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do { data = try encoder.encode(self) } catch { throw .encoding(path: path, "\(error)") }
        let temporary = path + ".new"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .system(call: "open", path: temporary, errno: errno) }
        var failure: ManifestError?
        do {
            try FileDescriptorIO.writeAll(fd, [UInt8](data), target: temporary)
        } catch {
            failure = .system(call: error.call, path: temporary, errno: error.errno)
        }
        if failure == nil, fsync(fd) != 0 { failure = .system(call: "fsync", path: temporary, errno: errno) }
        close(fd)
        if let failure { throw failure }
        guard rename(temporary, path) == 0 else { throw .system(call: "rename", path: path, errno: errno) }
    }
}

enum ManifestError: Error, CustomStringConvertible {
    case system(call: String, path: String, errno: Int32)
    case encoding(path: String, String)

    var description: String {
        switch self {
        case let .system(call, path, code):
            "cannot write the part's manifest \(path): \(call) failed: \(String(cString: strerror(code))). Check the disk holding recordings_dir"
        case let .encoding(path, detail):
            "cannot encode the part's manifest \(path): \(detail)"
        }
    }
}
