import FleetBus
import FleetProtocol
import Foundation

/// An agent written against proto-docs, as a third party would, with an enrolled node's key:
/// it says HELLO for one synthetic-looking camera, heartbeats, answers commands, and can drop
/// its connection and come back as the same or another agent process. Every call blocks (its
/// socket waits in zmq_poll): async tests run it on an OwnedThread.
///
/// `@unchecked Sendable`: its socket is used by one call at a time, whichever thread runs it.
public final class HandWrittenAgent: @unchecked Sendable {
    public let nodeID: String
    public let deviceID: String
    private let endpoint: String
    private let coordinatorKey: CurvePublicKey
    private let keys: CurveKeyPair
    private let context = ZMQContext()
    private var socket: ZMQSocket?
    private var heartbeats: UInt64 = 0

    public init(endpoint: String, coordinatorKey: CurvePublicKey, keys: CurveKeyPair, nodeID: String, deviceID: String) {
        self.endpoint = endpoint
        self.coordinatorKey = coordinatorKey
        self.keys = keys
        self.nodeID = nodeID
        self.deviceID = deviceID
    }

    /// Drops the connection it has (if any) and says HELLO as `instance` on a new one;
    /// returns once welcomed.
    public func register(instance: String) throws {
        try reconnect()
        try send(.with { $0.hello = hello(instance: instance) })
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            guard case let .welcome(welcome)? = try receive(milliseconds: 100)?.body else { continue }
            guard welcome.status.isOK else { throw HandWrittenAgentError("HELLO as \(instance) refused: \(welcome.status.reason)") }
            return
        }
        throw HandWrittenAgentError("no WELCOME for \(instance)")
    }

    /// Says the same HELLO `times` times on one new connection without waiting between them,
    /// as a client whose retries cross a slow WELCOME does; returns how many WELCOMEs (all OK)
    /// came within `seconds`, answering every command meanwhile with OK.
    public func registerRepeatedly(instance: String, times: Int, seconds: Double = 5) throws -> (welcomes: Int, commands: [Capfleet_V1_Command]) {
        try reconnect()
        for _ in 0..<times { try send(.with { $0.hello = hello(instance: instance) }) }
        var welcomes = 0
        var commands: [Capfleet_V1_Command] = []
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            switch try receive(milliseconds: 100)?.body {
            case let .welcome(welcome)?:
                guard welcome.status.isOK else { throw HandWrittenAgentError("HELLO as \(instance) refused: \(welcome.status.reason)") }
                welcomes += 1
            case let .command(command)?:
                commands.append(command)
                try answer(command, zoom: 1)
            default:
                if welcomes > 0 { try sendHeartbeat() }
            }
        }
        return (welcomes, commands)
    }

    /// Heartbeats and answers the coordinator's other commands (its policy pushes) with OK
    /// until a zoom arrives, which it returns unanswered; nil when none came within `seconds`.
    public func serveUntilZoom(seconds: Double = 10) throws -> Capfleet_V1_Command? {
        var zoom: Capfleet_V1_Command?
        try serve(seconds: seconds) { command in
            guard case .setZoom? = command.action else { return false }
            zoom = command
            return true
        }
        return zoom
    }

    /// Heartbeats every 300 ms and answers every command with OK for `seconds`, or until
    /// `stop` takes one.
    public func serve(seconds: Double, stop: (Capfleet_V1_Command) -> Bool = { _ in false }) throws {
        let deadline = Date().addingTimeInterval(seconds)
        var nextHeartbeat = Date()
        while Date() < deadline {
            if Date() >= nextHeartbeat {
                try sendHeartbeat()
                nextHeartbeat = Date().addingTimeInterval(0.3)
            }
            guard case let .command(command)? = try receive(milliseconds: 100)?.body else { continue }
            if stop(command) { return }
            try answer(command, zoom: 1)
        }
    }

    /// One heartbeat, returning once the coordinator acknowledged it: it, and everything the
    /// agent sent before it, has been handled.
    public func heartbeat() throws {
        try sendHeartbeat()
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            if case let .heartbeatAck(ack)? = try receive(milliseconds: 100)?.body, ack.sequence == heartbeats { return }
        }
        throw HandWrittenAgentError("no answer to heartbeat \(heartbeats)")
    }

    public func answer(_ command: Capfleet_V1_Command, zoom: Double) throws {
        try send(
            .with {
                $0.commandReply = .with {
                    $0.commandID = command.commandID
                    $0.status = .ok
                    $0.activeFrameRate = 15
                    $0.zoomFactor = zoom
                }
            })
    }

    /// Drops the connection it has (if any) for a new one.
    private func reconnect() throws {
        // Closed at once: every ZMQSocket lingers 0 ms.
        socket = nil
        let fresh = try ZMQSocket(context: context, type: .dealer)
        try fresh.makeCurveClient(serverKey: coordinatorKey, keys: keys)
        try fresh.connect(endpoint)
        socket = fresh
    }

    private func sendHeartbeat() throws {
        heartbeats += 1
        try send(
            .with {
                $0.heartbeat = .with {
                    $0.nodeID = nodeID
                    $0.sequence = heartbeats
                }
            })
    }

    private func send(_ message: Capfleet_V1_AgentMessage) throws {
        guard let socket else { throw HandWrittenAgentError("not connected: register first") }
        try socket.send(try message.serializedBytes() as [UInt8], dontWait: false)
    }

    private func receive(milliseconds: Int) throws -> Capfleet_V1_CoordinatorMessage? {
        guard let socket, socket.waitForInput(milliseconds: milliseconds), let received = try socket.receiveMultipart(dontWait: true),
            let part = received.parts.first
        else { return nil }
        return try Capfleet_V1_CoordinatorMessage(serializedBytes: part.array)
    }

    /// One 640x480 YUYV camera, 1–30 fps, zoom up to 8x.
    private func hello(instance: String) -> Capfleet_V1_Hello {
        .with {
            $0.protocolVersion = WireDefaults.protocolMajor
            $0.protocolMinor = WireDefaults.protocolMinor
            $0.nodeID = nodeID
            $0.nodeName = "hand-written"
            $0.agentInstance = instance
            $0.devices = [
                .with {
                    $0.deviceID = deviceID
                    $0.name = "Hand-written camera"
                    $0.driver = "test"
                    $0.kind = .synthetic
                    $0.formats = [
                        .with {
                            $0.pixelFormat = "YUYV"
                            $0.width = 640
                            $0.height = 480
                            $0.frameRateRanges = [
                                .with {
                                    $0.minFps = 1
                                    $0.maxFps = 30
                                }
                            ]
                            $0.maxZoomFactor = 8
                        }
                    ]
                    $0.activeFrameRate = 15
                }
            ]
        }
    }
}

public struct HandWrittenAgentError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
