import Foundation

/// Runs `work` on a thread of its own, as the coordinator runs a recorder: it blocks (disk
/// I/O, waiting for the index), which a task of the cooperative pool must never do.
func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}
