import CPlatform
import FleetCore
import FleetSystem
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// An IPv4 address and port, as `HOST:PORT`.
public struct RelayAddress: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: UInt16

    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]), port > 0 else { return nil }
        host = String(text[..<colon])
        var probe = in_addr()
        guard inet_pton(AF_INET, host, &probe) == 1 else { return nil }
        self.port = port
    }

    public var description: String { "\(host):\(port)" }

    var socketAddress: sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        _ = inet_pton(AF_INET, host, &address.sin_addr)
        return address
    }
}

/// Where the relay listens and where it passes each connection on to.
public struct RelayRoute: Sendable, Equatable {
    public var listen: RelayAddress
    public var target: RelayAddress

    public init(listen: RelayAddress, target: RelayAddress) {
        self.listen = listen
        self.target = target
    }

    /// "LISTEN=TARGET", e.g. "127.0.0.1:7600=10.77.0.1:7600".
    public init?(_ text: String) {
        let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2, let listen = RelayAddress(parts[0]), let target = RelayAddress(parts[1]) else { return nil }
        self.init(listen: listen, target: target)
    }
}

/// Why the relay cannot start: the socket call that failed, with errno.
public enum RelayError: Error, CustomStringConvertible {
    case cannotOpenSocket(SystemCallError)
    /// The listening address is taken (EADDRINUSE) or not this machine's.
    case cannotListen(RelayAddress, SystemCallError)

    public var errno: Int32 {
        switch self {
        case let .cannotOpenSocket(cause), let .cannotListen(_, cause): cause.errno
        }
    }

    public var description: String {
        switch self {
        case let .cannotOpenSocket(cause):
            "cannot open a socket: \(cause)"
        case let .cannotListen(address, cause) where cause.errno == EADDRINUSE:
            "cannot listen on \(address): the port is in use (is another relay or the coordinator on that port?) (\(cause))"
        case let .cannotListen(address, cause):
            "cannot listen on \(address): \(cause)"
        }
    }
}

/// The impairment in force, which a file may change while the relay runs.
public final class ImpairmentSetting: Sendable {
    private let value: Mutex<LinkImpairment>
    public init(_ impairment: LinkImpairment) { value = Mutex(impairment) }
    public var current: LinkImpairment { value.withLock { $0 } }
    public func set(_ impairment: LinkImpairment) { value.withLock { $0 = impairment } }

    /// Re-reads `path` whenever its modification time or size changes (checked every 100 ms,
    /// on a thread of its own) and applies what it says; a file that does not parse is
    /// reported and the impairment in force stays.
    public func follow(file path: String, report: @escaping @Sendable (Result<LinkImpairment, LinkImpairmentError>) -> Void) {
        _ = OwnedThread(name: "cf-relay-conf") { [self] in
            var seen: (Int, Int, Int)?
            while true {
                var status = stat()
                let stamp: (Int, Int, Int)? =
                    stat(path, &status) == 0
                    ? (Int(status.st_mtim.tv_sec), Int(status.st_mtim.tv_nsec), Int(status.st_size)) : nil
                if let stamp, seen.map({ $0 != stamp }) ?? true {
                    seen = stamp
                    let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
                    do throws(LinkImpairmentError) {
                        let impairment = try LinkImpairment(specification: text)
                        set(impairment)
                        report(.success(impairment))
                    } catch {
                        report(.failure(error))
                    }
                }
                usleep(100_000)
            }
        }
    }
}

/// A TCP relay that passes every connection it accepts on to its route's target, through a
/// delay line per direction that applies the link's impairment (`LinkImpairment`). It stands
/// in for the network between namespaces, since this kernel has no netem.
///
/// Each connection gets four threads of its own: a reader per direction that stamps chunks
/// as they arrive, and a writer per direction that sleeps until each chunk is due (absolute
/// CLOCK_MONOTONIC deadlines, 1 ns timer slack) and sends it.
public final class TCPRelay: Sendable {
    public let routes: [RelayRoute]
    let setting: ImpairmentSetting
    let origin = MonotonicTime.now()
    private let listeners: [Int32]
    private let connectionCount = Atomic<UInt64>(0)

    /// Binds every route's listening address now (so a taken port fails here, not later).
    public init(routes: [RelayRoute], setting: ImpairmentSetting) throws(RelayError) {
        self.routes = routes
        self.setting = setting
        var opened: [Int32] = []
        for route in routes {
            let descriptor: Int32
            do {
                descriptor = try systemCall("socket", on: "\(route.listen)") {
                    socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                }
            } catch {
                opened.forEach { close($0) }
                throw .cannotOpenSocket(error)
            }
            var yes: Int32 = 1
            setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
            var address = route.listen.socketAddress
            do {
                try systemCall("bind", on: "\(route.listen)") {
                    withUnsafePointer(to: &address) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                    }
                }
                try systemCall("listen", on: "\(route.listen)") { listen(descriptor, 64) }
            } catch {
                close(descriptor)
                opened.forEach { close($0) }
                throw .cannotListen(route.listen, error)
            }
            opened.append(descriptor)
        }
        listeners = opened
    }

    /// Connections accepted so far.
    public var connections: UInt64 { connectionCount.load(ordering: .relaxed) }

    /// Starts accepting on every route; returns at once.
    public func start(log: @escaping @Sendable (String) -> Void) {
        for (route, listener) in zip(routes, listeners) {
            // Accepts for the relay's whole life: nobody joins it.
            _ = OwnedThread(name: "cf-relay-accept") { [self] in
                while true {
                    let client: Int32
                    do throws(SystemCallError) {
                        client = try systemCall("accept", on: "\(route.listen)") { accept(listener, nil, nil) }
                    } catch  where error.errno == ECONNABORTED {
                        continue
                    } catch {
                        log("relay: \(error); no longer listening there")
                        return
                    }
                    _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                    connectionCount.add(1, ordering: .relaxed)
                    relay(client, route: route, log: log)
                }
            }
        }
    }

    private func relay(_ client: Int32, route: RelayRoute, log: @escaping @Sendable (String) -> Void) {
        let target = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = route.target.socketAddress
        let connected =
            target >= 0
            && withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(target, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            } == 0
        guard connected else {
            // The peer sees its connection closed and retries, as it would with no route.
            log("relay: cannot reach \(route.target): \(String(cString: strerror(errno)))")
            if target >= 0 { close(target) }
            close(client)
            return
        }
        for descriptor in [client, target] {
            var yes: Int32 = 1
            setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
        }
        let pair = RelayedConnection(client: client, target: target)
        let seed = setting.current.seed &+ connectionCount.load(ordering: .relaxed) &* 0x1000_0001
        pair.start(schedule: DeliverySchedule(direction: .up, origin: origin, seed: seed), from: client, to: target, setting: setting)
        pair.start(schedule: DeliverySchedule(direction: .down, origin: origin, seed: seed), from: target, to: client, setting: setting)
    }
}

/// One relayed connection: two descriptors, closed when all four threads are done (the last
/// one out closes them, so nobody needs to join).
private final class RelayedConnection: Sendable {
    /// Small chunks (a clock probe, a command) leave on time to the microsecond; bulk data
    /// (frames) to the timer's precision, since waiting awake for each of its chunks would
    /// cost a core. See `DelayLine.arrive(at:)`.
    static let preciseChunkBytes = 4096

    let client: Int32
    let target: Int32
    private let finishedThreads = Atomic<Int>(0)
    private let aborted = Atomic<Bool>(false)

    init(client: Int32, target: Int32) {
        self.client = client
        self.target = target
    }

    func start(schedule: DeliverySchedule, from source: Int32, to destination: Int32, setting: ImpairmentSetting) {
        let line = DelayLine()
        let reader = OwnedThread(name: "cf-relay-in")
        let writer = OwnedThread(name: "cf-relay-out")
        reader.start { [self] in
            var schedule = schedule
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                // Bounded: a slow receiver slows the sender, as TCP's window would.
                while line.queuedBytes > 8 << 20, !aborted.load(ordering: .relaxed) { usleep(1_000) }
                // An error ends the stream as end-of-file does: the peer sees the connection close.
                let count =
                    (try? systemCall("read", on: "a relayed connection") { buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) } })
                    ?? 0
                let now = MonotonicTime.now()
                if count <= 0 {
                    line.push(.finish, due: schedule.due(arrival: now, impairment: .none))
                    break
                }
                line.push(.data(Array(buffer[..<count])), due: schedule.due(arrival: now, impairment: setting.current))
            }
            done()
        }
        writer.start { [self] in
            _ = capfleet_set_timer_slack(1)
            while true {
                let (item, due) = line.pop()
                if case .data(let bytes) = item, bytes.count <= Self.preciseChunkBytes {
                    DelayLine.arrive(at: due)
                } else {
                    DelayLine.sleep(until: due)
                }
                switch item {
                case .data(let bytes):
                    if !Self.writeAll(bytes, to: destination) { abort() }
                case .finish:
                    shutdown(destination, Int32(SHUT_WR))
                    done()
                    return
                }
            }
        }
    }

    /// A write failed: end both directions (their readers see end of stream).
    private func abort() {
        guard !aborted.exchange(true, ordering: .relaxed) else { return }
        shutdown(client, Int32(SHUT_RDWR))
        shutdown(target, Int32(SHUT_RDWR))
    }

    private func done() {
        if finishedThreads.add(1, ordering: .acquiringAndReleasing).newValue == 4 {
            close(client)
            close(target)
        }
    }

    private static func writeAll(_ bytes: [UInt8], to descriptor: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            guard
                let written = try? systemCall(
                    "send", on: "a relayed connection",
                    {
                        bytes.withUnsafeBytes { send(descriptor, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
                    })
            else { return false }
            offset += written
        }
        return true
    }
}

/// Chunks waiting for their delivery time, in order.
private final class DelayLine: Sendable {
    enum Item: Sendable {
        case data([UInt8])
        case finish
    }

    private let queue = Mutex<(items: [(Item, UInt64)], head: Int, bytes: Int)>(([], 0, 0))
    private let available = DispatchSemaphore(value: 0)

    var queuedBytes: Int { queue.withLock { $0.bytes } }

    func push(_ item: Item, due: UInt64) {
        queue.withLock {
            $0.items.append((item, due))
            if case .data(let bytes) = item { $0.bytes += bytes.count }
        }
        available.signal()
    }

    func pop() -> (Item, UInt64) {
        available.wait()
        return queue.withLock { state in
            let entry = state.items[state.head]
            state.head += 1
            if case .data(let bytes) = entry.0 { state.bytes -= bytes.count }
            // Compact now and then rather than shifting on every pop.
            if state.head > 1024, state.head * 2 > state.items.count {
                state.items.removeFirst(state.head)
                state.head = 0
            }
            return entry
        }
    }

    /// Waits until `due` and returns within a microsecond or two of it: asleep until 150 µs
    /// before, then awake. A timer alone wakes 10–60 µs late on a busy VM, at random: jitter
    /// the link was never asked for, and on the clock test bed it moved the delay floors the
    /// estimate rests on by ±10–30 µs from one minute to the next.
    static func arrive(at due: UInt64) {
        let margin: UInt64 = 150_000
        if due > margin { sleep(until: due - margin) }
        while MonotonicTime.now() < due {}
    }

    static func sleep(until due: UInt64) {
        var deadline = timespec(tv_sec: Int(due / 1_000_000_000), tv_nsec: Int(due % 1_000_000_000))
        // EINVAL only for a deadline out of range: then there is nothing to wait for.
        _ = try? systemCallReturningError("clock_nanosleep", on: "a relay's delivery time") {
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nil)
        }
    }
}
