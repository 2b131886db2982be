import FleetRecording
import FleetStore

extension IndexedSegment {
    /// What the fleet database's index says of a segment.
    init(_ record: SegmentRecord) {
        self.init(
            deviceID: record.deviceId, number: record.number, path: record.path, isOpen: record.state == .open, sizeBytes: record.sizeBytes,
            sha256: record.sha256, frames: record.frames, firstFleetNs: record.firstFleetNs, lastFleetNs: record.lastFleetNs,
            firstSequence: record.firstSequence, lastSequence: record.lastSequence)
    }
}

extension SegmentVerifier {
    /// A segment's file against the fleet database's index.
    static func verify(_ record: SegmentRecord, takeStart: UInt64) -> Report {
        verify(IndexedSegment(record), takeStart: takeStart)
    }
}
