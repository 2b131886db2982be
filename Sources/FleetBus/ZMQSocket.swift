import CZeroMQ

public enum ZMQSocketType: Int32, Sendable {
    case pair = 0, pub = 1, sub = 2, req = 3, rep = 4, dealer = 5, router = 6, pull = 7, push = 8, xpub = 9, xsub = 10

    var name: String { String(describing: self).uppercased() }
}

/// The I/O thread a socket's connections run on, in a `ZMQContext.withSeparateLanes()`.
public enum IOLane: Int64, Sendable {
    /// Frames: the bulk of the bytes and of the encryption work.
    case bulk = 1
    /// Everything else: control dialog, operator requests, telemetry.
    case control = 2
}

/// A libzmq socket. Not thread-safe: create it, hand it to one `SocketLoop` (or keep it on
/// one thread), and touch it from that thread only.
public final class ZMQSocket {
    public let type: ZMQSocketType
    let handle: UnsafeMutableRawPointer
    /// Held so the context outlives its sockets: zmq_ctx_term waits for every socket to close.
    private let context: ZMQContext
    public private(set) var endpoint: String = "(unbound)"
    private var isClosed = false

    public init(context: ZMQContext, type: ZMQSocketType) throws(ZMQError) {
        guard let handle = zmq_socket(context.handle, type.rawValue) else {
            throw ZMQError(call: "zmq_socket", target: type.name, errno: capfleet_errno())
        }
        self.type = type
        self.handle = handle
        self.context = context
        // Never let close() block shutdown on undeliverable messages.
        try setOption(ZMQ_LINGER, Int32(0))
    }

    deinit { close() }

    public func close() {
        guard !isClosed else { return }
        isClosed = true
        zmq_close(handle)
    }

    public func bind(_ endpoint: String) throws(ZMQError) {
        self.endpoint = endpoint
        try zmqCall("zmq_bind", on: endpoint) { zmq_bind(handle, endpoint) }
    }

    public func connect(_ endpoint: String) throws(ZMQError) {
        self.endpoint = endpoint
        try zmqCall("zmq_connect", on: endpoint) { zmq_connect(handle, endpoint) }
    }

    public func disconnect(_ endpoint: String) throws(ZMQError) {
        try zmqCall("zmq_disconnect", on: endpoint) { zmq_disconnect(handle, endpoint) }
    }

    /// The endpoint actually bound (resolves `tcp://127.0.0.1:*` to a port).
    public func lastEndpoint() throws(ZMQError) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        var size = buffer.count
        try zmqCall("zmq_getsockopt(ZMQ_LAST_ENDPOINT)", on: endpoint) { zmq_getsockopt(handle, ZMQ_LAST_ENDPOINT, &buffer, &size) }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func setOption(_ option: Int32, _ value: Int32) throws(ZMQError) {
        var value = value
        try zmqCall("zmq_setsockopt(\(option))", on: endpoint) { zmq_setsockopt(handle, option, &value, MemoryLayout<Int32>.size) }
    }

    func setOption(_ option: Int32, _ value: Int64) throws(ZMQError) {
        var value = value
        try zmqCall("zmq_setsockopt(\(option))", on: endpoint) { zmq_setsockopt(handle, option, &value, MemoryLayout<Int64>.size) }
    }

    func setOption(_ option: Int32, bytes: [UInt8]) throws(ZMQError) {
        try zmqCall("zmq_setsockopt(\(option))", on: endpoint) {
            bytes.withUnsafeBytes { zmq_setsockopt(handle, option, $0.baseAddress, $0.count) }
        }
    }

    /// Which of a two-lane context's I/O threads serves this socket's connections
    /// (ZMQ_AFFINITY). Set before connect or bind.
    public func use(_ lane: IOLane) throws(ZMQError) {
        // With one I/O thread there is only one lane (an affinity naming a missing thread fails).
        guard context.ioThreads >= 2 else { return }
        try setOption(ZMQ_AFFINITY, Int64(lane.rawValue))
    }

    public func subscribe(_ prefix: String) throws(ZMQError) { try setOption(ZMQ_SUBSCRIBE, bytes: Array(prefix.utf8)) }

    // MARK: Sending

    /// Sends one part, copying `bytes`. Returns false when the send would block and
    /// `dontWait` was set (the high-water mark is reached).
    @discardableResult
    public func send(_ bytes: UnsafeRawBufferPointer, more: Bool = false, dontWait: Bool = false) throws(ZMQError) -> Bool {
        let flags = (more ? ZMQ_SNDMORE : 0) | (dontWait ? ZMQ_DONTWAIT : 0)
        do {
            try zmqCall("zmq_send", on: endpoint) { zmq_send(handle, bytes.baseAddress, bytes.count, flags) }
            return true
        } catch  where error.wouldBlock && dontWait {
            return false
        }
    }

    @discardableResult
    public func send(_ bytes: [UInt8], more: Bool = false, dontWait: Bool = false) throws(ZMQError) -> Bool {
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(ZMQError) -> Bool in try send(buffer, more: more, dontWait: dontWait) }
        }
        return try result.get()
    }

    /// Sends several parts as one message.
    @discardableResult
    public func send(parts: [[UInt8]], dontWait: Bool = false) throws(ZMQError) -> Bool {
        for (index, part) in parts.enumerated() {
            let sent = try send(part, more: index < parts.count - 1, dontWait: dontWait)
            if !sent { return false }
        }
        return true
    }

    /// Sends `count` bytes at `data` without copying: libzmq keeps `owner` alive until the
    /// bytes are on the wire, then releases it (`zmq_msg_init_data`).
    @discardableResult
    public func sendZeroCopy(
        _ data: UnsafeMutableRawPointer, count: Int, owner: AnyObject, more: Bool = false, dontWait: Bool = false
    ) throws(ZMQError) -> Bool {
        var message = zmq_msg_t()
        let hint = Unmanaged.passRetained(owner).toOpaque()
        let rc = zmq_msg_init_data(
            &message, data, count,
            { _, hint in
                if let hint { Unmanaged<AnyObject>.fromOpaque(hint).release() }
            }, hint)
        if rc != 0 {
            Unmanaged<AnyObject>.fromOpaque(hint).release()
            throw ZMQError(call: "zmq_msg_init_data", target: endpoint, errno: capfleet_errno())
        }
        let flags = (more ? ZMQ_SNDMORE : 0) | (dontWait ? ZMQ_DONTWAIT : 0)
        do {
            try zmqCall("zmq_msg_send", on: endpoint) { zmq_msg_send(&message, handle, flags) }
            return true
        } catch {
            zmq_msg_close(&message)  // releases owner through the free function
            if error.wouldBlock && dontWait { return false }
            throw error
        }
    }

    /// Sends a received part on, without copying its bytes: libzmq shares the buffer of a
    /// large message between both (`zmq_msg_copy`). Returns false when the send would block
    /// and `dontWait` was set.
    @discardableResult
    public func send(_ part: ZMQMessage, more: Bool = false, dontWait: Bool = false) throws(ZMQError) -> Bool {
        var message = zmq_msg_t()
        zmq_msg_init(&message)
        guard zmq_msg_copy(&message, part.message) == 0 else {
            zmq_msg_close(&message)
            throw ZMQError(call: "zmq_msg_copy", target: endpoint, errno: capfleet_errno())
        }
        let flags = (more ? ZMQ_SNDMORE : 0) | (dontWait ? ZMQ_DONTWAIT : 0)
        do {
            try zmqCall("zmq_msg_send", on: endpoint) { zmq_msg_send(&message, handle, flags) }
            return true
        } catch {
            zmq_msg_close(&message)
            if error.wouldBlock && dontWait { return false }
            throw error
        }
    }

    // MARK: Receiving

    /// Receives one whole message. Returns nil when nothing is waiting and `dontWait` is set.
    /// At most `maxParts` parts are kept; the rest are read and discarded, and `overflowed`
    /// tells the caller the message had the wrong shape.
    public func receiveMultipart(dontWait: Bool = true, maxParts: Int = 8) throws(ZMQError) -> (parts: [ZMQMessage], overflowed: Bool)? {
        var parts: [ZMQMessage] = []
        var overflowed = false
        repeat {
            let part = ZMQMessage()
            let flags = (dontWait && parts.isEmpty && !overflowed) ? ZMQ_DONTWAIT : 0
            do {
                try zmqCall("zmq_msg_recv", on: endpoint) { zmq_msg_recv(part.message, handle, flags) }
            } catch  where error.wouldBlock && parts.isEmpty && !overflowed {
                return nil
            }
            let more = part.hasMore
            if parts.count < maxParts { parts.append(part) } else { overflowed = true }
            if !more { break }
        } while true
        return (parts, overflowed)
    }

    /// Blocks the calling thread until input arrives or `milliseconds` pass. For sockets
    /// outside a `SocketLoop` (the CLI, benchmarks, tests).
    public func waitForInput(milliseconds: Int) -> Bool {
        var item = zmq_pollitem_t(socket: handle, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0)
        // Fails only once the context is terminated (ETERM): no input will come then.
        let ready = (try? zmqCall("zmq_poll", on: "a socket waiting for input") { zmq_poll(&item, 1, milliseconds) }) ?? 0
        return ready > 0
    }

    /// Whether a message is waiting (ZMQ_EVENTS has POLLIN).
    public var hasInput: Bool {
        var events: Int32 = 0
        var size = MemoryLayout<Int32>.size
        guard zmq_getsockopt(handle, ZMQ_EVENTS, &events, &size) == 0 else { return false }
        return events & Int32(ZMQ_POLLIN) != 0
    }
}
