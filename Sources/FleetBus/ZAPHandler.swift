import CZeroMQ
import Synchronization

/// One ZAP request (RFC 27): a peer finished the CURVE handshake and asks to be let in.
public struct ZAPRequest: Sendable {
    /// The server socket's ZMQ_ZAP_DOMAIN: which endpoint the peer is connecting to.
    public let domain: String
    /// The peer's IP address.
    public let address: String
    public let mechanism: String
    /// The client's long-term public key (CURVE only).
    public let clientKey: CurvePublicKey?
}

public enum ZAPDecision: Sendable, Equatable {
    /// Let the peer in; every message it sends carries `userID` as its "User-Id" property.
    case allow(userID: String)
    /// Refuse the handshake. The client sees only a failed handshake (status 400); the
    /// reason is for our logs and audit.
    case deny(reason: String)
}

/// The ZAP handler of one ZeroMQ context: a REP socket on `inproc://zeromq.zap.01`, on a
/// thread of its own, asking `decide` about every CURVE handshake of that context's server
/// sockets. Bind it before any server socket binds and stop it after they have all closed:
/// libzmq lets every peer in when no handler is bound.
public final class ZAPHandler: Sendable {
    public static let endpoint = "inproc://zeromq.zap.01"
    private let loop: SocketLoop

    public init(context: ZMQContext, decide: @escaping @Sendable (ZAPRequest) -> ZAPDecision) throws(ZMQError) {
        let socket = try ZMQSocket(context: context, type: .rep)
        try socket.bind(Self.endpoint)
        loop = SocketLoop(name: "zap")
        loop.add(socket) { socket in
            while let received = try? socket.receiveMultipart(dontWait: true, maxParts: 8) {
                let reply = Self.answer(received.parts, decide: decide)
                _ = try? socket.send(parts: reply)
            }
        }
        loop.start()
    }

    public func stop() { loop.stop() }

    /// Frames: version, request id, domain, address, identity, mechanism, credentials…
    static func answer(_ parts: [ZMQMessage], decide: (ZAPRequest) -> ZAPDecision) -> [[UInt8]] {
        guard parts.count >= 6, parts[0].array == Array("1.0".utf8) else {
            let requestID = parts.count > 1 ? parts[1].array : []
            return [Array("1.0".utf8), requestID, Array("500".utf8), Array("malformed ZAP request".utf8), [], []]
        }
        let text = { (index: Int) in String(decoding: parts[index].array, as: UTF8.self) }
        let mechanism = text(5)
        let key = mechanism == "CURVE" && parts.count >= 7 ? CurvePublicKey(bytes: parts[6].array) : nil
        let request = ZAPRequest(domain: text(2), address: text(3), mechanism: mechanism, clientKey: key)
        switch decide(request) {
        case let .allow(userID):
            return [Array("1.0".utf8), parts[1].array, Array("200".utf8), Array("OK".utf8), Array(userID.utf8), []]
        case let .deny(reason):
            return [Array("1.0".utf8), parts[1].array, Array("400".utf8), Array(reason.utf8), [], []]
        }
    }
}

/// What a socket monitor reports about connections (zmq_socket_monitor, version 1 events).
public struct SocketEvent: Sendable {
    public let event: Int32
    /// The event's value: a file descriptor, an errno, a protocol error or a ZAP status.
    public let value: UInt32
    public let endpoint: String

    public var isHandshakeFailure: Bool {
        event & (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0
    }

    /// Why a handshake failed, in words an operator can act on.
    public var handshakeFailure: String? {
        switch event {
        case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
            "refused by the ZAP handler (status \(value))"
        case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
            switch Int32(bitPattern: value) {
            case ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH: "not CURVE (a plain or otherwise mismatched connection)"
            case ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC: "CURVE with the wrong server key, or a corrupted handshake"
            default: "handshake protocol error 0x\(String(value, radix: 16))"
            }
        case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
            "handshake failed (errno \(value))"
        default: nil
        }
    }

    public static let handshakeEvents =
        ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
        | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED

    public static let succeeded = ZMQ_EVENT_HANDSHAKE_SUCCEEDED
    public static let authFailure = ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
    public static let disconnected = ZMQ_EVENT_DISCONNECTED
}

extension ZMQSocket {
    /// A PAIR socket that receives this socket's connection events (zmq_socket_monitor).
    /// Read it with `SocketEvent.drain`.
    public func openMonitor(context: ZMQContext, events: Int32) throws(ZMQError) -> ZMQSocket {
        let address = "inproc://cf-monitor-\(MonitorAddress.next())"
        try zmqCall("zmq_socket_monitor", on: address) { zmq_socket_monitor(handle, address, events) }
        let pair = try ZMQSocket(context: context, type: .pair)
        try pair.connect(address)
        return pair
    }
}

extension SocketEvent {
    /// Every event waiting on a monitor PAIR socket.
    public static func drain(_ pair: ZMQSocket) -> [SocketEvent] {
        var events: [SocketEvent] = []
        while let received = try? pair.receiveMultipart(dontWait: true, maxParts: 2), received.parts.count == 2 {
            let head = received.parts[0].array
            guard head.count >= 6 else { continue }
            let event = Int32(UInt16(head[0]) | UInt16(head[1]) << 8)
            let value = UInt32(head[2]) | UInt32(head[3]) << 8 | UInt32(head[4]) << 16 | UInt32(head[5]) << 24
            events.append(SocketEvent(event: event, value: value, endpoint: String(decoding: received.parts[1].array, as: UTF8.self)))
        }
        return events
    }
}

extension SocketLoop {
    /// Watches `socket`'s connection events on this loop's thread. Call before `start`.
    public func monitor(
        _ socket: ZMQSocket, context: ZMQContext, events: Int32,
        onEvent: @escaping (SocketEvent) -> Void
    ) throws(ZMQError) {
        let pair = try socket.openMonitor(context: context, events: events)
        add(pair) { pair in SocketEvent.drain(pair).forEach(onEvent) }
    }
}

private enum MonitorAddress {
    static let counter = Atomic<Int>(0)
    static func next() -> Int { counter.add(1, ordering: .relaxed).newValue }
}
