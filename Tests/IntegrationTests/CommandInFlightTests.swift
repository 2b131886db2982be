import CZeroMQ
import FleetBus
import FleetProtocol
import Foundation
import GRDB
import Testing

extension IntegrationTests {
    /// A node that reconnects while an operator's command waits for it (README, "Commands";
    /// proto-docs/commands.md): a restarted agent never answers, so the operator hears so at
    /// once; the same agent on a new connection still answers.
    @Suite struct CommandInFlightTests {
        @Test func aRestartedAgent_hasItsCommandAnsweredAtOnce_aReconnectedOneStillAnswers() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            // A real agent enrolls the node; a hand-written one with its key plays it from then on.
            let agent = try fleet.startAgent("replayed")
            try await fleet.waitUntil("the agent registers", seconds: 20) { try fleet.onlineNodeIDs().count == 1 }
            let nodeID = try #require(try fleet.onlineNodeIDs().first)
            let deviceID = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            _ = try fleet.json(["lock", deviceID])
            #expect(agent.stop() == 0)
            let node = try HandWrittenAgent(fleet: fleet, nodeID: nodeID, deviceID: deviceID)

            // 1. The command reaches the agent; the agent restarts before answering.
            try node.register(instance: "first process")
            let restartedMidCommand = Task.detached { try fleet.cli(["zoom", deviceID, "2"], timeout: 30) }
            guard let lost = try node.serve(untilZoom: 20) else {
                let result = try await restartedMidCommand.value
                Issue.record("no zoom reached the agent; the operator heard: \(result.status) \(result.error)")
                return
            }
            try node.register(instance: "second process")
            let restarted = try await restartedMidCommand.value
            #expect(restarted.status != 0)
            #expect(restarted.error.contains("restarted before answering") && restarted.error.contains("may or may not have been applied"),
                    "the operator hears why, not a timeout: \(restarted.error)")
            // The old process's answer, were it to come now, is nobody's.
            try node.answer(lost, zoom: 2)

            // 2. The same process reconnects (a new connection, the same agent_instance): its answer still counts.
            let reconnectedMidCommand = Task.detached { try fleet.cli(["zoom", deviceID, "3", "--json"], timeout: 30) }
            guard let pending = try node.serve(untilZoom: 20) else {
                let result = try await reconnectedMidCommand.value
                Issue.record("no zoom reached the agent; the operator heard: \(result.status) \(result.error)")
                return
            }
            try node.register(instance: "second process")
            try node.answer(pending, zoom: 3)
            let reconnected = try await reconnectedMidCommand.value
            #expect(reconnected.status == 0, "\(reconnected.error)")
            let device = try JSONSerialization.jsonObject(with: Data(reconnected.output.utf8)) as? [String: Any]
            #expect(device?["zoom_factor"] as? Double == 3, "\(reconnected.output)")

            let audit = try await DatabaseQueue(path: fleet.databasePath).read { db in
                try String.fetchAll(db, sql: "SELECT outcome || ': ' || detail FROM auditLog WHERE action = 'device.zoom' ORDER BY id")
            }
            #expect(audit.count == 2)
            #expect(audit.first?.hasPrefix("failed: ") == true && audit.first?.contains("restarted before answering") == true,
                    "the lost zoom is audited with its reason: \(audit)")
            #expect(audit.last?.hasPrefix("ok: ") == true, "\(audit)")
        }
    }
}

/// An agent written by hand against proto-docs (as a third party would), with an enrolled
/// node's key: registers, heartbeats, answers commands, and can drop its connection.
private final class HandWrittenAgent {
    let fleet: FleetHarness
    let nodeID: String
    let deviceID: String
    let keys: CurveKeyPair
    let context = ZMQContext()
    private var socket: ZMQSocket?
    private var heartbeat: UInt64 = 0

    init(fleet: FleetHarness, nodeID: String, deviceID: String) throws {
        self.fleet = fleet
        self.nodeID = nodeID
        self.deviceID = deviceID
        keys = try fleet.agentKeys("replayed")
    }

    deinit { try? socket?.setOption(ZMQ_LINGER, Int32(0)) }

    /// Drops the current connection (if any) and registers on a new one as `instance`.
    func register(instance: String) throws {
        try socket?.setOption(ZMQ_LINGER, Int32(0))
        socket = nil
        let control = try fleet.socket(.dealer, port: fleet.controlPort, keys: keys, context: context)
        socket = control
        try send(.with {
            $0.hello = .with {
                $0.protocolVersion = WireDefaults.protocolMajor
                $0.protocolMinor = WireDefaults.protocolMinor
                $0.nodeID = nodeID
                $0.nodeName = "replayed"
                $0.agentInstance = instance
                $0.devices = [.with {
                    $0.deviceID = deviceID
                    $0.name = "Hand-written camera"
                    $0.driver = "test"
                    $0.kind = .synthetic
                    $0.formats = [.with {
                        $0.pixelFormat = "YUYV"
                        $0.width = 640
                        $0.height = 480
                        $0.frameRateRanges = [.with {
                            $0.minFps = 1
                            $0.maxFps = 30
                        }]
                        $0.maxZoomFactor = 8
                    }]
                    $0.activeFrameRate = 15
                }]
            }
        })
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            guard let message = try receive(milliseconds: 200) else { continue }
            if case let .welcome(welcome)? = message.body {
                guard welcome.status.isOK else { throw HarnessError("HELLO as \(instance) refused: \(welcome.status.reason)") }
                return
            }
        }
        throw HarnessError("no WELCOME for \(instance)")
    }

    /// Heartbeats and answers the coordinator's other commands until a zoom arrives; returns it
    /// unanswered, or nil when none came within `seconds`.
    func serve(untilZoom seconds: Double) throws -> Capfleet_V1_Command? {
        var zoom: Capfleet_V1_Command?
        try serve(seconds: seconds) { command in
            guard case .setZoom? = command.action else { return false }
            zoom = command
            return true
        }
        return zoom
    }

    /// Heartbeats and answers every command with OK for `seconds`, or until `stop` takes one.
    func serve(seconds: Double, stop: (Capfleet_V1_Command) -> Bool = { _ in false }) throws {
        let deadline = Date().addingTimeInterval(seconds)
        var nextHeartbeat = Date()
        while Date() < deadline {
            if Date() >= nextHeartbeat {
                heartbeat += 1
                try send(.with { $0.heartbeat = .with {
                    $0.nodeID = nodeID
                    $0.sequence = heartbeat
                } })
                nextHeartbeat = Date().addingTimeInterval(0.3)
            }
            guard let message = try receive(milliseconds: 100), case let .command(command)? = message.body else { continue }
            if stop(command) { return }
            try answer(command, zoom: 1)
        }
    }

    func answer(_ command: Capfleet_V1_Command, zoom: Double) throws {
        try send(.with { $0.commandReply = .with {
            $0.commandID = command.commandID
            $0.status = .ok
            $0.activeFrameRate = 15
            $0.zoomFactor = zoom
        } })
    }

    private func send(_ message: Capfleet_V1_AgentMessage) throws {
        guard let socket else { throw HarnessError("not connected") }
        try socket.send(try message.serializedBytes() as [UInt8], dontWait: false)
    }

    private func receive(milliseconds: Int) throws -> Capfleet_V1_CoordinatorMessage? {
        guard let socket, socket.waitForInput(milliseconds: milliseconds), let received = try socket.receiveMultipart(dontWait: true),
              let part = received.parts.first else { return nil }
        return try Capfleet_V1_CoordinatorMessage(serializedBytes: part.array)
    }
}
