import CPlatform
import Foundation
import Synchronization

/// A thread a component owns, for work that blocks (zmq_poll, ioctl, disk I/O, checksums):
/// the cooperative pool never waits on it. It has a name that ps and /proc show, knows
/// whether it is the caller's thread (so `ThreadBound` can check), and can be awaited
/// (`join`) from async code or waited for from a thread of one's own (`joinBlocking`).
///
/// Made first and started second, so state bound to it (`ThreadBound`) can exist before
/// the body that uses it runs.
public final class OwnedThread: Sendable {
    public let name: String
    private struct State {
        var id: pthread_t?
        var started = false
        var finished = false
        var joiners: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())
    private let finishedSignal = DispatchSemaphore(value: 0)

    /// `name` is what ps shows: Linux keeps 15 bytes, so "cf-" and what the thread does.
    public init(name: String) {
        self.name = name
    }

    /// A thread named `name` running `body`, started at once.
    public convenience init(name: String, body: @escaping @Sendable () -> Void) {
        self.init(name: name)
        start(body)
    }

    /// Starts the thread; a thread starts once.
    public func start(_ body: @escaping @Sendable () -> Void) {
        let first = state.withLock { state in
            defer { state.started = true }
            return !state.started
        }
        precondition(first, "OwnedThread \(name) started twice")
        let thread = Thread { [self] in
            state.withLock { $0.id = pthread_self() }
            _ = capfleet_name_this_thread(name)
            body()
            let joiners = state.withLock { state in
                state.finished = true
                defer { state.joiners.removeAll() }
                return state.joiners
            }
            finishedSignal.signal()
            for joiner in joiners { joiner.resume() }
        }
        thread.name = name
        thread.start()
    }

    /// Whether the caller runs on this thread.
    public var isCurrent: Bool {
        guard let id = state.withLock({ $0.id }) else { return false }
        return pthread_equal(id, pthread_self()) != 0
    }

    public var isFinished: Bool { state.withLock { $0.finished } }

    /// Resumes once the thread's body has returned (at once if it has, or never started
    /// and never will: callers start before they join).
    public func join() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                if state.finished { return true }
                state.joiners.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// Blocks the calling thread until the body has returned. Never from the async pool:
    /// from `deinit`, a C callback or another owned thread.
    public func joinBlocking() {
        precondition(!isCurrent, "OwnedThread \(name) cannot wait for itself")
        if state.withLock({ $0.finished }) { return }
        finishedSignal.wait()
        finishedSignal.signal()  // later waiters pass too
    }

    /// Runs blocking `work` on a new thread of its own and resumes with its result: the
    /// seam for one-off blocking work (SQLite's backup, a checksum, a file's repair).
    public static func run<T: Sendable>(_ name: String, _ work: @escaping @Sendable () -> T) async -> T {
        let result = Mutex<T?>(nil)
        let thread = OwnedThread(name: name) { result.withLock { $0 = work() } }
        await thread.join()
        return result.withLock { $0! }
    }

    /// `run` for work that throws: the error crosses back to the caller as it was thrown.
    public static func run<T: Sendable>(_ name: String, _ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await run(name) { Result(catching: work) }.get()
    }
}
