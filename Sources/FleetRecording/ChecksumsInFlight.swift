import Dispatch
import Synchronization

/// A recorder's finished segments handed to the checksummer whose SHA-256 is not yet in the
/// index. The part's writer waits on them before it says the part is stored: a stored part's
/// every segment has its checksum in the index, which export and verify check files against.
final class ChecksumsInFlight: Sendable {
    private let group = DispatchGroup()
    private let firstFailure = Mutex<RecordingError?>(nil)

    /// A segment was handed to the checksummer.
    func handedOver() { group.enter() }

    /// Its checksum is in the index (nil), or could not be made or indexed.
    func settled(_ failure: RecordingError?) {
        if let failure { firstFailure.withLock { if $0 == nil { $0 = failure } } }
        group.leave()
    }

    /// Blocks until every checksum handed over so far is settled; throws the first that failed.
    func wait() throws(RecordingError) {
        group.wait()
        if let failure = firstFailure.withLock({ $0 }) { throw failure }
    }
}
