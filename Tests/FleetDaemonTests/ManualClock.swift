import Synchronization

/// A clock that stands still until the test advances it: `sleep(until:)` suspends until
/// an `advance` reaches the deadline (or the sleeping task is cancelled), so a test says
/// exactly when each beat is due and never waits on real time.
final class ManualClock: Clock, Sendable {
    struct Instant: InstantProtocol {
        var sinceStart: Duration

        func advanced(by duration: Duration) -> Instant { Instant(sinceStart: sinceStart + duration) }
        func duration(to other: Instant) -> Duration { other.sinceStart - sinceStart }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.sinceStart < rhs.sinceStart }
    }

    private struct Sleeper {
        let id: Int
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(sinceStart: .zero)
        var sleepers: [Sleeper] = []
        /// Sleeps begun so far, and tests waiting for a count of them.
        var sleepsBegun = 0
        var sleepWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
        /// Sleeps cancelled before they were registered.
        var cancelled: Set<Int> = []
        var nextID = 0
    }

    private let state = Mutex(State())

    var now: Instant { state.withLock { $0.now } }
    var minimumResolution: Duration { .zero }

    /// Tasks asleep on this clock now.
    var sleeping: Int { state.withLock { $0.sleepers.count } }
    /// Sleeps begun on this clock since it was made.
    var sleepsBegun: Int { state.withLock { $0.sleepsBegun } }

    func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Now { case wake, cancel, sleep }
                let (now, waiters): (Now, [CheckedContinuation<Void, Never>]) = state.withLock { state in
                    if state.cancelled.remove(id) != nil { return (.cancel, []) }
                    if deadline <= state.now { return (.wake, []) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    state.sleepsBegun += 1
                    let count = state.sleepsBegun
                    let due = state.sleepWaiters.filter { $0.count <= count }.map(\.continuation)
                    state.sleepWaiters.removeAll { $0.count <= count }
                    return (.sleep, due)
                }
                switch now {
                case .wake: continuation.resume()
                case .cancel: continuation.resume(throwing: CancellationError())
                case .sleep: for waiter in waiters { waiter.resume() }
                }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else {
                    state.cancelled.insert(id)
                    return nil
                }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock on and wakes every sleeper whose deadline it reaches.
    func advance(by duration: Duration) {
        let due = state.withLock { state in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Returns once `count` sleeps have begun on this clock since it was made: a test
    /// advances only when the service waits for its next beat, so no advance is lost.
    func waitForSleeps(_ count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let already = state.withLock { state in
                if state.sleepsBegun >= count { return true }
                state.sleepWaiters.append((count, continuation))
                return false
            }
            if already { continuation.resume() }
        }
    }
}
