import Foundation

/// Runs `work` on a thread of its own, as the coordinator runs a recorder: it blocks (disk
/// I/O, waiting for the index), which a task of the cooperative pool must never do.
func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}

/// A directory of its own for one test, removed with the test's suite instance (each test
/// gets a fresh instance of a class suite, and its deinit runs when the test ends).
final class ScratchDirectory: Sendable {
    let path: String

    init(_ prefix: String) throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
