import FleetCore
import FleetSystem
import Synchronization

/// Checksums finished segments on a thread of its own. A segment of 1080p video is gigabytes:
/// reading it back for its SHA-256 takes seconds, which a recorder must not spend with frames
/// waiting. The recorder hands the finished file over and goes on with the next segment; the
/// index gets the checksum a little later (`sha256` is empty until then).
public final class SegmentHasher: Sendable {
    public typealias Done = @Sendable (Result<String, RecordingError>) -> Void

    private struct Job: Sendable {
        let path: String
        let done: Done
    }
    /// Queued and in progress, shared with the worker's thread.
    private final class Pending: Sendable {
        let count = Atomic<Int>(0)
    }
    private let worker: OwnedWorker<Job>
    private let busy = Pending()

    public init() {
        let busy = self.busy
        worker = OwnedWorker(
            name: "cf-hasher",
            onDrop: { job in
                job.done(.failure(.checksummerStopped(path: job.path)))
                busy.count.subtract(1, ordering: .acquiringAndReleasing)
            }
        ) { job in
            let result: Result<String, RecordingError>
            do throws(RecordingError) { result = .success(try SegmentDigest.sha256(ofFile: job.path)) } catch { result = .failure(error) }
            job.done(result)
            busy.count.subtract(1, ordering: .acquiringAndReleasing)
        }
    }

    /// Queues `path`; `done` runs on the hasher's thread with its SHA-256.
    public func checksum(_ path: String, done: @escaping Done) {
        busy.count.add(1, ordering: .acquiringAndReleasing)
        worker.post(Job(path: path, done: done))
    }

    /// Files queued and not yet checksummed.
    public var pending: Int { busy.count.load(ordering: .acquiring) }

    /// Checksums what is queued, then ends the thread.
    public func stop() async { await worker.stop() }
}
