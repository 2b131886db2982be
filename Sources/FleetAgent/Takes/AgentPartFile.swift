import FleetCore
import FleetRecording
import Foundation
import Synchronization

/// One part's manifest, in memory and on disk, shared by the threads that change it: the
/// part's writer (segments opened and finished), the hasher (checksums) and the recordings
/// link (what the coordinator acknowledged). Every change is saved before `update` returns.
final class AgentPartFile: Sendable {
    let directory: String
    let path: String
    private let manifest: Mutex<AgentPartManifest>

    init(directory: String, manifest: AgentPartManifest) {
        self.directory = directory
        path = directory + "/" + AgentPartManifest.fileName
        self.manifest = Mutex(manifest)
    }

    var current: AgentPartManifest { manifest.withLock { $0 } }
    var key: TakeDeviceKey { manifest.withLock { TakeDeviceKey(takeID: $0.takeID, deviceID: $0.deviceID) } }

    /// Changes the manifest and saves it, under one lock so saves follow changes in order.
    @discardableResult
    func update<T>(_ change: (inout AgentPartManifest) -> T) throws(ManifestError) -> T {
        let result: Result<T, ManifestError> = manifest.withLock { manifest in
            let value = change(&manifest)
            do throws(ManifestError) {
                try manifest.save(path: path)
                return .success(value)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}

/// The recorder's index on the agent: the part's manifest. Each segment is noted when it opens
/// (so a crash leaves a trail to repair), when it finishes (with the part's tally and the drops
/// within it) and when its SHA-256 is known; from then on it is reported to the coordinator.
/// Called on the part's writer thread (and the hasher's, for checksums).
final class ManifestSegmentIndex: SegmentIndexing {
    private let file: AgentPartFile
    private let clock: @Sendable () -> Int64
    private let onReportable: @Sendable () -> Void
    /// The part's drops at the end of the previous segment: a segment's own are the difference.
    private let dropsBefore: Mutex<DropTally>

    init(file: AgentPartFile, clock: @escaping @Sendable () -> Int64, onReportable: @escaping @Sendable () -> Void) {
        self.file = file
        self.clock = clock
        self.onReportable = onReportable
        dropsBefore = Mutex(file.current.lastTally?.drops.tally ?? DropTally())
    }

    func segmentOpened(_ segment: SegmentOpening) throws(RecordingError) {
        try save("opening segment \(segment.number)") { manifest in
            manifest.segments.removeAll { $0.number == segment.number }
            manifest.segments.append(ManifestSegment(number: segment.number, path: segment.path, state: .open))
        }
    }

    func segmentFinished(_ segment: FinishedSegment, ledger: TakeFrameLedger, payloadBytes: Int64) throws(RecordingError) {
        let drops = dropsBefore.withLock { before in
            defer { before = ledger.dropped }
            return ledger.dropped.since(before)
        }
        let tally = ManifestTally(
            pixelFormat: segment.format.pixelFormat.fourCC, width: segment.format.width, height: segment.format.height,
            frameRate: segment.format.frameRate, firstFleetNs: ledger.firstFleetTime, lastFleetNs: ledger.lastFleetTime,
            firstSequence: ledger.firstSequence, lastSequence: ledger.lastSequence, frames: ledger.stored,
            bytes: payloadBytes, drops: ManifestDrops(ledger.dropped),
            encoder: segment.format.encoder.isEmpty ? nil : segment.format.encoder,
            sourcePixelFormat: segment.format.sourcePixelFormat.isEmpty ? nil : segment.format.sourcePixelFormat,
            bitDepth: segment.format.bitDepth == 8 ? nil : segment.format.bitDepth, colour: segment.format.colour?.description,
            depthUnitMetres: segment.format.depthUnitMetres)
        let closed = clock()
        try save("finishing segment \(segment.number)") { manifest in
            guard let index = manifest.segments.firstIndex(where: { $0.number == segment.number }) else { return }
            manifest.segments[index].state = .finished
            manifest.segments[index].sizeBytes = segment.sizeBytes
            manifest.segments[index].sha256 = segment.sha256
            manifest.segments[index].frames = UInt64(segment.frames)
            manifest.segments[index].firstFleetNs = segment.firstFleetTime
            manifest.segments[index].lastFleetNs = segment.lastFleetTime
            manifest.segments[index].firstSequence = segment.firstSequence
            manifest.segments[index].lastSequence = segment.lastSequence
            manifest.segments[index].drops = ManifestDrops(drops)
            manifest.segments[index].tally = tally
            manifest.segments[index].closedUnixMs = closed
        }
        if !segment.sha256.isEmpty { onReportable() }
    }

    func segmentChecksummed(_ segment: FinishedSegment, sha256: String) throws(RecordingError) {
        try save("checksumming segment \(segment.number)") { manifest in
            guard let index = manifest.segments.firstIndex(where: { $0.number == segment.number }) else { return }
            manifest.segments[index].sha256 = sha256
        }
        onReportable()
    }

    private func save(_ what: String, _ change: (inout AgentPartManifest) -> Void) throws(RecordingError) {
        do {
            try file.update(change)
        } catch {
            throw .index(what: what, underlying: error)
        }
    }
}
