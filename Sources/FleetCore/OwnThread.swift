import Foundation

/// The seam between async code and blocking work (disk I/O, SQLite's backup, checksums): the
/// work runs on a new thread of its own, so the cooperative pool never blocks, and the
/// caller resumes with its result.
public enum OwnThread {
    public static func run<T: Sendable>(_ name: String, _ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: work()) }
            thread.name = name
            thread.start()
        }
    }
}
