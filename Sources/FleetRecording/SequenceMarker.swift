import FleetCore
import Foundation

/// A timed-metadata entry that gives the sequence number of the frame at its time; the frames
/// after it count up by one until the next marker. `dropped` is what went missing, by reason,
/// since the previous marker (in this segment or the one before), so the files alone account
/// for every frame. Recorders write one before a segment's first frame, after every gap and
/// once a second (proto-docs/recordings.md).
public struct SequenceMarker: Sendable, Equatable {
    public static let kind = "sequence"
    public var sequence: UInt64
    public var fleetTime: UInt64
    public var dropped: DropTally

    public init(sequence: UInt64, fleetTime: UInt64, dropped: DropTally) {
        self.sequence = sequence
        self.fleetTime = fleetTime
        self.dropped = dropped
    }

    /// `{"kind":"sequence","sequence":…,"fleet_ns":…}`, plus `dropped` when anything was.
    public var json: String {
        var text = #"{"kind":"sequence","sequence":\#(sequence),"fleet_ns":\#(fleetTime)"#
        if dropped.total > 0 {
            text += #","dropped":{"late":\#(dropped.late),"out_of_buffers":\#(dropped.outOfBuffers),"discontinuity":\#(dropped.discontinuity)"#
            // Written only when there were some: files of raw takes read as before.
            if dropped.encoderLate > 0 { text += #","encoder_late":\#(dropped.encoderLate)"# }
            text += "}"
        }
        return text + "}"
    }

    /// The marker in a metadata entry, or nil if the entry is another kind.
    public init?(json: String) {
        struct Wire: Decodable {
            struct Dropped: Decodable {
                var late: UInt64?
                var out_of_buffers: UInt64?
                var discontinuity: UInt64?
                var encoder_late: UInt64?
            }
            var kind: String
            var sequence: UInt64?
            var fleet_ns: UInt64?
            var dropped: Dropped?
        }
        guard let wire = try? JSONDecoder().decode(Wire.self, from: Data(json.utf8)), wire.kind == Self.kind,
            let sequence = wire.sequence, let fleetTime = wire.fleet_ns
        else { return nil }
        self.sequence = sequence
        self.fleetTime = fleetTime
        dropped = DropTally(
            late: wire.dropped?.late ?? 0, outOfBuffers: wire.dropped?.out_of_buffers ?? 0,
            discontinuity: wire.dropped?.discontinuity ?? 0, encoderLate: wire.dropped?.encoder_late ?? 0)
    }
}
