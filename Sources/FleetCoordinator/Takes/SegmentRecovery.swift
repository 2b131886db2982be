import FleetCore
import FleetRecording
import FleetStore
import FleetSystem
import Foundation

/// At the coordinator's start: every segment the index still calls open was being written
/// when the coordinator died. Each is repaired (SegmentRepair) so it plays, and indexed with
/// what its file now holds; one whose file never reached the disk is forgotten. The repairs
/// are blocking disk I/O and run on a thread of their own, one segment at a time.
public enum SegmentRecovery {
    public struct Report: Sendable, Equatable {
        public var path: String
        /// nil when the segment was forgotten (no file, or no header in it).
        public var outcome: SegmentRepair.Outcome?
        public var note: String
    }

    public static func recoverOpenSegments(
        in store: FleetDatabase, clock: @escaping @Sendable () -> UnixMilliseconds
    ) async throws(StoreError) -> [Report] {
        var reports: [Report] = []
        for segment in try await store.openSegments() {
            let start = try await store.take(id: segment.takeId)?.startFleetNs ?? 0
            let repaired = await OwnedThread.run("cf-recovery") { () -> Result<SegmentRepair.Outcome, RecordingError> in
                do throws(RecordingError) { return .success(try SegmentRepair.repair(path: segment.path)) } catch { return .failure(error) }
            }
            switch repaired {
            case .success(let outcome):
                var record = segment
                record.frames = Int64(outcome.frames)
                record.firstFleetNs = outcome.firstTimestamp.map { start + $0 }
                record.lastFleetNs = outcome.lastTimestamp.map { start + $0 }
                record.firstSequence = outcome.firstSequence
                record.lastSequence = outcome.lastSequence
                let path = segment.path
                let (size, sha) = await OwnedThread.run("cf-recovery") { () -> (Int64, String) in
                    let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64) ?? 0
                    return (size, (try? SegmentDigest.sha256(ofFile: path)) ?? "")
                }
                record.sizeBytes = size
                record.sha256 = sha
                record.closedAt = clock()
                try await store.recordRepairedSegment(record, dropped: outcome.dropped)
                reports.append(
                    Report(
                        path: segment.path, outcome: outcome,
                        note: "repaired: \(outcome.frames) frames kept, \(outcome.partialFramesDropped) cut short by the crash left out"))
            case .failure(let error):
                let path = segment.path
                _ = await OwnedThread.run("cf-recovery") { unlink(path) }
                try await store.forgetSegment(takeID: segment.takeId, deviceID: segment.deviceId, number: segment.number)
                reports.append(Report(path: segment.path, outcome: nil, note: "forgotten: nothing playable was written (\(error))"))
            }
        }
        // Segments finished but not yet checksummed when the coordinator stopped.
        for segment in try await store.segmentsWithoutChecksum() {
            let path = segment.path
            guard let sha = await OwnedThread.run("cf-recovery", { try? SegmentDigest.sha256(ofFile: path) }) else { continue }
            try await store.setSegmentChecksum(takeID: segment.takeId, deviceID: segment.deviceId, number: segment.number, sha256: sha)
            reports.append(Report(path: segment.path, outcome: nil, note: "checksummed after a restart"))
        }
        return reports
    }
}
