import CZeroMQ
import FleetCore
import FleetSystem
import Foundation
import Synchronization

/// A thread that owns a set of ZeroMQ sockets and blocks in `zmq_poll` on them, so no
/// socket is ever touched by two threads and the async pool never blocks on libzmq.
///
/// Other threads reach the sockets only through `perform`, which queues a closure and
/// wakes the poll through an eventfd; readable sockets are handed to their handler on the
/// loop thread. Results cross to async code through whatever the handlers yield into
/// (an `AsyncStream` continuation): that is the one seam between the two worlds.
public final class SocketLoop: @unchecked Sendable {
    public struct SocketID: Hashable, Sendable { let index: Int }
    public struct TimerID: Hashable, Sendable { let index: Int }

    /// The sockets, lent to closures running on the loop thread.
    public struct Sockets {
        fileprivate unowned let loop: SocketLoop
        public subscript(id: SocketID) -> ZMQSocket { loop.sockets[id.index] }

        /// Asks the loop to call the socket's `onWritable` handler once it can take more
        /// (ZMQ_POLLOUT), or stops asking. Loop thread only.
        public func setWantsWritable(_ id: SocketID, _ wants: Bool) {
            loop.wantsWritable[id.index] = wants
        }

        /// Closes a socket and puts a fresh one in its place (the zguide's cure for a
        /// peer that went away: a new socket, not a reused one). Loop thread only.
        public func replace(_ id: SocketID, with socket: ZMQSocket) {
            loop.sockets[id.index].close()
            loop.sockets[id.index] = socket
            loop.socketsChanged = true
        }

        /// Runs a timer `nanoseconds` from now, whatever it said last time (work arrived
        /// for a timer that was idle, or is due sooner). Loop thread only.
        public func schedule(_ id: TimerID, after nanoseconds: UInt64) {
            loop.timers[id.index].next = MonotonicTime.now() &+ nanoseconds
        }
    }

    public let name: String
    private var sockets: [ZMQSocket] = []
    private var socketsChanged = false
    private var handlers: [(ZMQSocket) -> Void] = []
    private var writableHandlers: [(Sockets) -> Void] = []
    private var wantsWritable: [Bool] = []
    /// Each timer's next run (nil: idle until scheduled) and its body, which says when it
    /// wants to run again.
    private var timers: [(next: UInt64?, body: (Sockets) -> UInt64?)] = []
    private var stopHandlers: [() -> Void] = []
    private let wakeFD: Int32
    private let pending = Mutex<[(Sockets) -> Void]>([])
    private let stopRequested = Atomic<Bool>(false)
    private let thread: OwnedThread
    private var started = false

    public init(name: String) {
        self.name = name
        self.wakeFD = capfleet_eventfd()
        thread = OwnedThread(name: "cf-" + name)
    }

    deinit { close(wakeFD) }

    /// Adds a socket before `start`. `onReadable` runs on the loop thread whenever the
    /// socket has input; it should drain it with `receiveMultipart(dontWait: true)`.
    @discardableResult
    public func add(
        _ socket: ZMQSocket, onReadable: ((ZMQSocket) -> Void)? = nil,
        onWritable: ((Sockets) -> Void)? = nil
    ) -> SocketID {
        precondition(!started, "SocketLoop \(name): add sockets before start()")
        sockets.append(socket)
        handlers.append(onReadable ?? { _ in })
        writableHandlers.append(onWritable ?? { _ in })
        wantsWritable.append(false)
        return SocketID(index: sockets.count - 1)
    }

    /// Runs `body` on the loop thread every `interval` nanoseconds (heartbeats, flushes).
    public func every(nanoseconds interval: UInt64, _ body: @escaping (Sockets) -> Void) {
        timer(after: interval) { sockets in
            body(sockets)
            return interval
        }
    }

    /// Runs `body` on the loop thread `first` nanoseconds after the start, then again after
    /// whatever it returns, or not until `Sockets.schedule` asks when it returns nil: a loop
    /// with nothing due sleeps in `zmq_poll` instead of waking to find nothing to do (an idle
    /// agent's cost is its wake-ups, times the hundreds of agents a fleet has).
    @discardableResult
    public func timer(after first: UInt64, _ body: @escaping (Sockets) -> UInt64?) -> TimerID {
        precondition(!started, "SocketLoop \(name): add timers before start()")
        timers.append((MonotonicTime.now() &+ first, body))
        return TimerID(index: timers.count - 1)
    }

    /// Runs on the loop thread after its sockets are closed (finish streams here).
    public func onStop(_ body: @escaping () -> Void) {
        precondition(!started, "SocketLoop \(name): add stop handlers before start()")
        stopHandlers.append(body)
    }

    /// State for this loop's thread alone (what its handlers and `perform` closures share),
    /// checked on every use.
    public func bind<Value>(_ value: Value) -> ThreadBound<Value> {
        ThreadBound(value, on: thread)
    }

    public func start() {
        started = true
        thread.start { [self] in run() }
    }

    /// Queues `work` for the loop thread and wakes it.
    public func perform(_ work: @escaping @Sendable (Sockets) -> Void) {
        pending.withLock { $0.append(work) }
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Stops the loop, closes its sockets and waits for the thread to end.
    public func stop() {
        guard started, !stopRequested.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
        thread.joinBlocking()
    }

    private func run() {
        var items = pollItems()
        let lent = Sockets(loop: self)
        while !stopRequested.load(ordering: .acquiring) {
            if socketsChanged {
                socketsChanged = false
                items = pollItems()
            }
            let timeout = nextTimerTimeoutMilliseconds()
            do {
                try zmqCall("zmq_poll", on: "socket loop \(name)") { zmq_poll(&items, Int32(items.count), timeout) }
            } catch {
                break  // the context was terminated (ETERM): the process is stopping
            }
            if items[items.count - 1].revents != 0 {
                var counter: UInt64 = 0
                _ = read(wakeFD, &counter, 8)
            }
            let work = pending.withLock { queue in
                defer { queue.removeAll(keepingCapacity: true) }
                return queue
            }
            for body in work { body(lent) }
            // A socket replaced by the work above has stale poll results: skip a round.
            for index in sockets.indices where !socketsChanged && items[index].revents & Int16(ZMQ_POLLIN) != 0 {
                handlers[index](sockets[index])
            }
            for index in sockets.indices where !socketsChanged && items[index].revents & Int16(ZMQ_POLLOUT) != 0 {
                writableHandlers[index](lent)
            }
            for index in sockets.indices {
                items[index].events = Int16(ZMQ_POLLIN) | (wantsWritable[index] ? Int16(ZMQ_POLLOUT) : 0)
                items[index].revents = 0
            }
            runDueTimers(lent)
        }
        for socket in sockets { socket.close() }
        for handler in stopHandlers { handler() }
    }

    private func pollItems() -> [zmq_pollitem_t] {
        sockets.indices.map { index in
            zmq_pollitem_t(
                socket: sockets[index].handle, fd: 0,
                events: Int16(ZMQ_POLLIN) | (wantsWritable[index] ? Int16(ZMQ_POLLOUT) : 0), revents: 0)
        } + [zmq_pollitem_t(socket: nil, fd: wakeFD, events: Int16(ZMQ_POLLIN), revents: 0)]
    }

    private func nextTimerTimeoutMilliseconds() -> Int {
        guard let next = timers.compactMap(\.next).min() else { return -1 }
        let now = MonotonicTime.now()
        return next <= now ? 0 : Int((next - now) / 1_000_000) + 1
    }

    private func runDueTimers(_ lent: Sockets) {
        let now = MonotonicTime.now()
        for index in timers.indices {
            guard let next = timers[index].next, next <= now else { continue }
            timers[index].next = nil
            let again = timers[index].body(lent)
            // The body may have scheduled itself sooner through `lent`.
            if let again {
                let wanted = now &+ again
                timers[index].next = min(timers[index].next ?? wanted, wanted)
            }
        }
    }
}
