import Dispatch
import FleetCore
import Foundation
import Synchronization

/// Checksums finished segments on a thread of its own. A segment of 1080p video is gigabytes:
/// reading it back for its SHA-256 takes seconds, which a recorder must not spend with frames
/// waiting. The recorder hands the finished file over and goes on with the next segment; the
/// index gets the checksum a little later (`sha256` is empty until then).
public final class SegmentHasher: Sendable {
    public typealias Done = @Sendable (Result<String, RecordingError>) -> Void

    private let queue = Mutex<[(path: String, done: Done)]>([])
    private let wake = DispatchSemaphore(value: 0)
    private let idle = Mutex<[CheckedContinuation<Void, Never>]>([])
    private let busy = Atomic<Int>(0)

    public init() {
        let thread = Thread { [self] in
            ThreadName.set("cf-hasher")
            run()
        }
        thread.name = "cf-hasher"
        thread.start()
    }

    /// Queues `path`; `done` runs on the hasher's thread with its SHA-256.
    public func checksum(_ path: String, done: @escaping Done) {
        busy.add(1, ordering: .acquiringAndReleasing)
        queue.withLock { $0.append((path, done)) }
        wake.signal()
    }

    /// Files queued and not yet checksummed.
    public var pending: Int { busy.load(ordering: .acquiring) }

    private func run() {
        while true {
            wake.wait()
            guard let next = queue.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { continue }
            let result: Result<String, RecordingError>
            do throws(RecordingError) { result = .success(try SegmentDigest.sha256(ofFile: next.path)) } catch { result = .failure(error) }
            next.done(result)
            busy.subtract(1, ordering: .acquiringAndReleasing)
        }
    }
}
