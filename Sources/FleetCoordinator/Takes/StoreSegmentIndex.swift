import Dispatch
import FleetCore
import FleetRecording
import FleetStore
import Synchronization

/// Indexes a recorder's segments in the fleet database. The recorder runs on a thread of its
/// own and waits here for each write to be committed: this is the seam between that blocking
/// thread and the store's async API. Never call it from async code (it would block a thread
/// of the cooperative pool).
public final class StoreSegmentIndex: SegmentIndexing {
    private let store: FleetDatabase
    private let clock: @Sendable () -> UnixMilliseconds

    public init(store: FleetDatabase, clock: @escaping @Sendable () -> UnixMilliseconds) {
        self.store = store
        self.clock = clock
    }

    public func segmentOpened(_ segment: SegmentOpening) throws(RecordingError) {
        let record = SegmentRecord(takeId: segment.takeID, deviceId: segment.deviceID, number: segment.number, path: segment.path, openedAt: clock())
        let store = self.store
        try wait("opening segment \(segment.number) of \(segment.deviceID)") { () async throws(StoreError) in try await store.openSegment(record) }
    }

    public func segmentFinished(_ segment: FinishedSegment, ledger: TakeFrameLedger, payloadBytes: Int64) throws(RecordingError) {
        var record = SegmentRecord(takeId: segment.takeID, deviceId: segment.deviceID, number: segment.number, path: segment.path, openedAt: 0)
        record.state = .finished
        record.sizeBytes = segment.sizeBytes
        record.sha256 = segment.sha256
        record.frames = Int64(segment.frames)
        record.firstFleetNs = segment.firstFleetTime
        record.lastFleetNs = segment.lastFleetTime
        record.firstSequence = segment.firstSequence
        record.lastSequence = segment.lastSequence
        record.closedAt = clock()
        let format = segment.format
        let tally = TakeDeviceTally(
            pixelFormat: format.pixelFormat.fourCC, width: format.width, height: format.height, frameRate: format.frameRate,
            firstFleetNs: ledger.firstFleetTime, lastFleetNs: ledger.lastFleetTime, firstSequence: ledger.firstSequence,
            lastSequence: ledger.lastSequence, frames: Int64(clamping: ledger.stored), bytes: payloadBytes, drops: ledger.dropped,
            encoder: format.encoder, sourcePixelFormat: format.sourcePixelFormat, bitDepth: format.bitDepth, colour: format.colour,
            depthUnitMetres: format.depthUnitMetres)
        let store = self.store
        let finished = record
        try wait("finishing segment \(segment.number) of \(segment.deviceID)") { () async throws(StoreError) in
            try await store.finishSegment(finished, tally: tally)
        }
    }

    public func segmentChecksummed(_ segment: FinishedSegment, sha256: String) throws(RecordingError) {
        let store = self.store
        try wait("checksumming segment \(segment.number) of \(segment.deviceID)") { () async throws(StoreError) in
            try await store.setSegmentChecksum(takeID: segment.takeID, deviceID: segment.deviceID, number: segment.number, sha256: sha256)
        }
    }

    private func wait(_ what: String, _ body: @escaping @Sendable () async throws(StoreError) -> Void) throws(RecordingError) {
        let done = DispatchSemaphore(value: 0)
        let failure = Mutex<StoreError?>(nil)
        Task {
            do throws(StoreError) { try await body() } catch { failure.withLock { $0 = error } }
            done.signal()
        }
        done.wait()
        if let error = failure.withLock({ $0 }) { throw .index(what: what, underlying: error) }
    }
}
