import CZeroMQ
import FleetCore
import Logging

/// One message received on a ROUTER: who sent it and its parts (routing id stripped).
public struct RoutedMessage: Sendable {
    public let routingID: [UInt8]
    public let parts: [ZMQMessage]
    /// The sender's message had more parts than accepted; `parts` is truncated.
    public let overflowed: Bool

    /// The TCP peer address, for logs.
    public var peer: String { parts.first?.peerAddress ?? "unknown peer" }
    /// Who the ZAP handler admitted the sender as.
    public var userID: String? { parts.first?.userID }
    /// The connection's file descriptor (to close a revoked peer's connection).
    public var sourceFD: Int32 { parts.first?.sourceFD ?? -1 }
}

/// How a coordinator endpoint admits peers: CURVE with the coordinator's key pair, the
/// ZAP handler deciding per `domain`, and failed handshakes reported to `onHandshakeFailure`
/// (on the endpoint's thread) since the peer never gets to send a message.
public struct CurveServerSecurity: Sendable {
    public let keys: CurveKeyPair
    public let domain: String
    public let onHandshakeFailure: @Sendable (_ domain: String, _ event: SocketEvent) -> Void

    public init(keys: CurveKeyPair, domain: String, onHandshakeFailure: @escaping @Sendable (_ domain: String, _ event: SocketEvent) -> Void) {
        self.keys = keys
        self.domain = domain
        self.onHandshakeFailure = onHandshakeFailure
    }

    /// Makes `socket` a CURVE server and watches its handshakes on `loop`. Before bind.
    public func apply(to socket: ZMQSocket, loop: SocketLoop, context: ZMQContext) throws(ZMQError) {
        try socket.makeCurveServer(keys: keys, domain: domain)
        let (domain, report) = (self.domain, onHandshakeFailure)
        try loop.monitor(socket, context: context, events: SocketEvent.handshakeEvents) { event in
            if event.isHandshakeFailure { report(domain, event) }
        }
    }
}

/// A bound ROUTER socket on its own thread: requests come out of `messages` (an
/// AsyncStream, the seam into async code) and replies go back through `reply`.
public final class RouterEndpoint: Sendable {
    public let name: String
    public let messages: AsyncStream<RoutedMessage>
    public let boundEndpoint: String
    private let loop: SocketLoop
    private let router: SocketLoop.SocketID

    /// `onReceive` sees every message on the endpoint's thread as it comes off the wire,
    /// before it waits in `messages` (to note arrivals; it must be quick).
    public init(
        name: String, context: ZMQContext, bind endpoint: String, maxMessageBytes: Int64, maxParts: Int = 4,
        security: CurveServerSecurity, onReceive: (@Sendable (RoutedMessage) -> Void)? = nil
    ) throws(ZMQError) {
        let socket = try ZMQSocket(context: context, type: .router)
        try socket.setOption(ZMQ_MAXMSGSIZE, maxMessageBytes)
        // Replies to a peer that vanished are dropped, not queued forever.
        try socket.setOption(ZMQ_SNDHWM, Int32(1000))
        try socket.use(.control)
        loop = SocketLoop(name: name)
        try security.apply(to: socket, loop: loop, context: context)
        try socket.bind(endpoint)
        boundEndpoint = try socket.lastEndpoint()
        self.name = name
        let (stream, continuation) = AsyncStream.makeStream(of: RoutedMessage.self, bufferingPolicy: .bufferingNewest(10_000))
        messages = stream
        router = loop.add(socket) { socket in
            while let received = try? socket.receiveMultipart(dontWait: true, maxParts: maxParts + 1) {
                guard let identity = received.parts.first else { continue }
                let message = RoutedMessage(
                    routingID: identity.array, parts: Array(received.parts.dropFirst()),
                    overflowed: received.overflowed)
                onReceive?(message)
                continuation.yield(message)
            }
        }
        loop.onStop { continuation.finish() }
        loop.start()
    }

    /// Sends `parts` to the peer with `routingID`; silently dropped if it is gone.
    public func reply(to routingID: [UInt8], parts: [[UInt8]]) {
        let router = self.router
        loop.perform { sockets in
            _ = try? sockets[router].send(parts: [routingID] + parts, dontWait: true)
        }
    }

    public func stop() { loop.stop() }
}

/// A bound PUB socket on its own thread. Publishing never blocks the caller.
public final class TelemetryPublisherSocket: Sendable {
    public let boundEndpoint: String
    private let loop: SocketLoop
    private let pub: SocketLoop.SocketID

    public init(context: ZMQContext, bind endpoint: String, security: CurveServerSecurity) throws(ZMQError) {
        let socket = try ZMQSocket(context: context, type: .pub)
        try socket.setOption(ZMQ_SNDHWM, Int32(10_000))
        try socket.use(.control)
        loop = SocketLoop(name: "telemetry")
        try security.apply(to: socket, loop: loop, context: context)
        try socket.bind(endpoint)
        boundEndpoint = try socket.lastEndpoint()
        pub = loop.add(socket)
        loop.start()
    }

    public func publish(topic: String, payload: [UInt8]) {
        let pub = self.pub
        loop.perform { sockets in
            _ = try? sockets[pub].send(parts: [Array(topic.utf8), payload], dontWait: true)
        }
    }

    public func stop() { loop.stop() }
}
