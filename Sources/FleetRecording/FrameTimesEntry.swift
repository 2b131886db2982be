import FleetCore
import Foundation

/// A timed-metadata entry that gives the exact fleet time (ns) of consecutive frames: frame
/// `sequence` was captured at `fleet_ns`, and each frame after it `intervals_ns[i]` after the
/// one before. Matroska counts milliseconds, so the frames' own timestamps are rounded; these
/// keep the nanoseconds that frame sets pair frames by (proto-docs/recordings.md). Recorders
/// write one once a second, at a gap in the sequence and before a segment ends, covering the
/// frames since the last.
public struct FrameTimesEntry: Sendable, Equatable {
    public static let kind = "frame_times"
    public var sequence: UInt64
    public var fleetTime: UInt64
    public var intervals: [UInt64]

    public init(sequence: UInt64, fleetTime: UInt64, intervals: [UInt64] = []) {
        self.sequence = sequence
        self.fleetTime = fleetTime
        self.intervals = intervals
    }

    /// The frames it covers, in order.
    public var frames: [FrameTime] {
        var time = fleetTime
        var result = [FrameTime(sequence: sequence, fleetTime: time)]
        result.reserveCapacity(intervals.count + 1)
        for (index, interval) in intervals.enumerated() {
            time += interval
            result.append(FrameTime(sequence: sequence + UInt64(index) + 1, fleetTime: time))
        }
        return result
    }

    /// `{"kind":"frame_times","sequence":…,"fleet_ns":…,"intervals_ns":[…]}`.
    public var json: String {
        #"{"kind":"frame_times","sequence":\#(sequence),"fleet_ns":\#(fleetTime),"intervals_ns":["#
            + intervals.map(String.init).joined(separator: ",") + "]}"
    }

    /// The entry in a metadata entry's JSON, or nil if it is another kind.
    public init?(json: String) {
        // Cheap refusal first: most entries are sequence markers and notes.
        guard json.contains(#""frame_times""#) else { return nil }
        struct Wire: Decodable {
            var kind: String
            var sequence: UInt64?
            var fleet_ns: UInt64?
            var intervals_ns: [UInt64]?
        }
        guard let wire = try? JSONDecoder().decode(Wire.self, from: Data(json.utf8)), wire.kind == Self.kind,
            let sequence = wire.sequence, let fleetTime = wire.fleet_ns
        else { return nil }
        self.init(sequence: sequence, fleetTime: fleetTime, intervals: wire.intervals_ns ?? [])
    }
}
