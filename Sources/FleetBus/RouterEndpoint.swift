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
}

/// A bound ROUTER socket on its own thread: requests come out of `messages` (an
/// AsyncStream, the seam into async code) and replies go back through `reply`.
public final class RouterEndpoint: Sendable {
    public let name: String
    public let messages: AsyncStream<RoutedMessage>
    public let boundEndpoint: String
    private let loop: SocketLoop
    private let router: SocketLoop.SocketID

    public init(name: String, context: ZMQContext, bind endpoint: String, maxMessageBytes: Int64, maxParts: Int = 4) throws(ZMQError) {
        let socket = try ZMQSocket(context: context, type: .router)
        try socket.setOption(ZMQ_MAXMSGSIZE, maxMessageBytes)
        // Replies to a peer that vanished are dropped, not queued forever.
        try socket.setOption(ZMQ_SNDHWM, Int32(1000))
        try socket.bind(endpoint)
        boundEndpoint = try socket.lastEndpoint()
        self.name = name
        let (stream, continuation) = AsyncStream.makeStream(of: RoutedMessage.self, bufferingPolicy: .bufferingNewest(10_000))
        messages = stream
        loop = SocketLoop(name: name)
        router = loop.add(socket) { socket in
            while let received = try? socket.receiveMultipart(dontWait: true, maxParts: maxParts + 1) {
                guard let identity = received.parts.first else { continue }
                continuation.yield(RoutedMessage(routingID: identity.array, parts: Array(received.parts.dropFirst()),
                                                 overflowed: received.overflowed))
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

    public init(context: ZMQContext, bind endpoint: String) throws(ZMQError) {
        let socket = try ZMQSocket(context: context, type: .pub)
        try socket.setOption(ZMQ_SNDHWM, Int32(10_000))
        try socket.bind(endpoint)
        boundEndpoint = try socket.lastEndpoint()
        loop = SocketLoop(name: "telemetry")
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
