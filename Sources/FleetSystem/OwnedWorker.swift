import Dispatch
import Synchronization

/// An owned thread with an inbox: messages posted from anywhere are handled on the thread,
/// one at a time and in order, by state that lives only there (it is made on the thread,
/// so it need not be Sendable and nothing else can touch it). The one shape of every
/// blocking worker: a take's writer, the checksummer, the pressure sampler, alert delivery.
///
/// - `post` always takes a message (control messages: stop here, note this); `offer` takes
///   one only while the inbox holds fewer than `capacity`, and otherwise drops the oldest
///   or refuses the new one, as `whenFull` says (frames from a peer that ignores its credit,
///   alerts nobody can deliver fast enough).
/// - `tick` wakes the thread at least that often, and after every batch of messages, for
///   periodic work (flushes, samples).
/// - `stop` handles what is queued, runs `finish`, ends the thread and resumes once it has.
public final class OwnedWorker<Message: Sendable>: Sendable {
    public enum WhenFull: Sendable {
        /// The oldest queued message goes to `onDrop` and the new one is queued: news first.
        case dropOldest
        /// The new message is not taken (`offer` returns false).
        case refuseNewest
    }

    public let thread: OwnedThread
    private struct Inbox {
        var messages: [Message] = []
        var stopping = false
    }
    private let inbox = Mutex(Inbox())
    private let wake = DispatchSemaphore(value: 0)
    private let capacity: Int
    private let whenFull: WhenFull
    private let onDrop: @Sendable (Message) -> Void

    /// - Parameters:
    ///   - name: the thread's name (at most 15 bytes, "cf-…").
    ///   - tickNanoseconds: how often `onTick` runs at the latest; nil: only after messages.
    ///   - state: makes the worker's state, on its thread.
    public init<State>(
        name: String, capacity: Int = .max, whenFull: WhenFull = .refuseNewest, tickNanoseconds: UInt64? = nil,
        onDrop: @escaping @Sendable (Message) -> Void = { _ in },
        state makeState: @escaping @Sendable () -> State,
        handle: @escaping @Sendable (inout State, Message) -> Void,
        onTick: @escaping @Sendable (inout State) -> Void = { _ in },
        finish: @escaping @Sendable (inout State) -> Void = { _ in }
    ) {
        self.capacity = capacity
        self.whenFull = whenFull
        self.onDrop = onDrop
        thread = OwnedThread(name: name)
        // The thread holds the worker until it ends: a worker lives until it is stopped.
        thread.start { [self] in
            var state = makeState()
            while true {
                if let tickNanoseconds {
                    _ = wake.wait(timeout: .now() + .nanoseconds(Int(clamping: tickNanoseconds)))
                } else {
                    wake.wait()
                }
                let (batch, stopping) = inbox.withLock { inbox in
                    defer { inbox.messages.removeAll(keepingCapacity: true) }
                    return (inbox.messages, inbox.stopping)
                }
                for message in batch { handle(&state, message) }
                onTick(&state)
                if stopping {
                    // Whatever slipped in after the stop was asked for is still handled.
                    let rest = inbox.withLock { inbox in
                        defer { inbox.messages.removeAll() }
                        return inbox.messages
                    }
                    for message in rest { handle(&state, message) }
                    finish(&state)
                    return
                }
            }
        }
    }

    /// A stateless worker: `handle` alone.
    public convenience init(
        name: String, capacity: Int = .max, whenFull: WhenFull = .refuseNewest,
        onDrop: @escaping @Sendable (Message) -> Void = { _ in },
        handle: @escaping @Sendable (Message) -> Void
    ) {
        self.init(name: name, capacity: capacity, whenFull: whenFull, onDrop: onDrop, state: { () }, handle: { _, message in handle(message) })
    }

    /// Queues a message whatever the inbox holds. False once the worker is stopping (the
    /// message then goes to `onDrop`).
    @discardableResult
    public func post(_ message: Message) -> Bool {
        let taken = inbox.withLock { inbox -> Bool in
            guard !inbox.stopping else { return false }
            inbox.messages.append(message)
            return true
        }
        if taken { wake.signal() } else { onDrop(message) }
        return taken
    }

    /// Queues a message within the inbox's capacity; never blocks. With `.dropOldest` the
    /// message is always taken (the oldest goes to `onDrop`); with `.refuseNewest` it is
    /// refused, and false returned, while the inbox is full.
    @discardableResult
    public func offer(_ message: Message) -> Bool {
        let outcome = inbox.withLock { inbox -> Offered in
            guard !inbox.stopping else { return .refused }
            guard inbox.messages.count >= capacity else {
                inbox.messages.append(message)
                return .taken
            }
            switch whenFull {
            case .refuseNewest:
                return .refused
            case .dropOldest:
                inbox.messages.append(message)
                return .displaced(inbox.messages.removeFirst())
            }
        }
        switch outcome {
        case .taken:
            wake.signal()
            return true
        case let .displaced(oldest):
            onDrop(oldest)
            wake.signal()
            return true
        case .refused:
            onDrop(message)
            return false
        }
    }

    private enum Offered {
        case taken
        case displaced(Message)
        case refused
    }

    /// Messages queued and not yet handled.
    public var queued: Int { inbox.withLock { $0.messages.count } }

    /// Asks the worker to stop after what is queued; returns at once.
    public func requestStop() {
        let first = inbox.withLock { inbox in
            defer { inbox.stopping = true }
            return !inbox.stopping
        }
        if first { wake.signal() }
    }

    /// Handles what is queued, runs `finish`, ends the thread; resumes once it has ended.
    public func stop() async {
        requestStop()
        await thread.join()
    }

    /// `stop` for callers that are not async (never the cooperative pool).
    public func stopBlocking() {
        requestStop()
        thread.joinBlocking()
    }
}
