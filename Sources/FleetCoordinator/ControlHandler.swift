import FleetBus
import FleetCore
import FleetProtocol
import FleetStore
import Foundation
import Logging

/// A node registered with this coordinator process: where to reach it (the ROUTER
/// routing id of its latest message) and what its latest status said.
struct NodeSession: Sendable {
    var routingID: [UInt8]
    var lastStatus: Capfleet_V1_AgentStatus?
}

/// The coordinator's side of the control dialog (registration, heartbeats, status):
/// turns agents' messages into store writes, liveness updates, events and replies.
actor ControlHandler {
    static let endpointName = "control"

    private let configuration: CoordinatorConfiguration
    private let store: FleetDatabase
    private let endpoint: RouterEndpoint
    private let ingest: FrameIngest
    private let events: FleetEvents
    private let rejections: RejectionCounter
    private let logger: Logger
    private let coordinatorID: String
    private var liveness: NodeLiveness
    private(set) var sessions: [String: NodeSession] = [:]
    private var pendingCommands: [UInt64: CheckedContinuation<Capfleet_V1_CommandReply, Never>] = [:]
    private var nextCommandID: UInt64 = 1

    init(configuration: CoordinatorConfiguration, store: FleetDatabase, endpoint: RouterEndpoint, ingest: FrameIngest,
         events: FleetEvents, rejections: RejectionCounter, coordinatorID: String, logger: Logger) {
        self.configuration = configuration
        self.store = store
        self.endpoint = endpoint
        self.ingest = ingest
        self.events = events
        self.rejections = rejections
        self.coordinatorID = coordinatorID
        self.logger = logger
        liveness = NodeLiveness(heartbeatIntervalNanoseconds: UInt64(configuration.heartbeatIntervalMilliseconds) * 1_000_000,
                                liveness: UInt64(configuration.heartbeatLiveness))
    }

    func isOnline(_ nodeID: String) -> Bool { liveness.isOnline(nodeID) }

    func session(_ nodeID: String) -> NodeSession? { sessions[nodeID] }

    /// Consumes the control endpoint until it closes.
    func serve() async {
        for await message in endpoint.messages {
            await handle(message)
        }
    }

    private func handle(_ routed: RoutedMessage) async {
        guard routed.parts.count == 1, !routed.overflowed else {
            refuse(routed, .wrongPartCount, "a control message is exactly one part (an AgentMessage)")
            return
        }
        guard let message = try? Capfleet_V1_AgentMessage(serializedBytes: routed.parts[0].array) else {
            refuse(routed, .undecodable, "not an AgentMessage (\(routed.parts[0].count) bytes)")
            return
        }
        switch message.body {
        case let .hello(hello)?:
            await register(hello, from: routed)
        case let .heartbeat(heartbeat)?:
            guard await heard(from: heartbeat.nodeID, routed: routed) else { return }
            reply(routed, .with { $0.heartbeatAck = .with { $0.sequence = heartbeat.sequence } })
        case let .status(status)?:
            guard await heard(from: status.nodeID, routed: routed) else { return }
            sessions[status.nodeID]?.lastStatus = status
            for device in status.devices { ingest.noteAgentDrops(deviceID: device.deviceID, drops: DropTally(wire: device.drops), streaming: device.streaming) }
        case let .commandReply(reply)?:
            // A reply to a command that already timed out is dropped.
            pendingCommands.removeValue(forKey: reply.commandID)?.resume(returning: reply)
        case nil:
            refuse(routed, .unknownMessage, "the AgentMessage carries no body this coordinator knows")
        }
    }

    private func register(_ hello: Capfleet_V1_Hello, from routed: RoutedMessage) async {
        guard hello.protocolVersion == WireDefaults.protocolMajor else {
            rejections.reject(endpoint: Self.endpointName, reason: .incompatibleVersion, peer: routed.peer,
                              detail: "node \(hello.nodeID) speaks protocol \(hello.protocolVersion.rawValue)")
            reply(routed, .with { $0.welcome = .with {
                $0.status = .failure(.incompatible, "this coordinator speaks protocol version \(WireDefaults.protocolMajor.rawValue) (any minor); the agent sent \(hello.protocolVersion.rawValue). Upgrade the older of the two.")
                $0.coordinatorID = coordinatorID
                $0.protocolVersion = WireDefaults.protocolMajor
            } })
            return
        }
        guard !hello.nodeID.isEmpty, hello.devices.allSatisfy({ !$0.deviceID.isEmpty }) else {
            refuse(routed, .undecodable, "HELLO without a node id or with a device without an id")
            return
        }
        let registration = NodeRegistration(
            nodeID: hello.nodeID, name: hello.nodeName, hostname: hello.hostname, softwareVersion: hello.softwareVersion,
            address: routed.peer,
            devices: hello.devices.map { device in
                NodeRegistration.Device(
                    description: DeviceDescription(deviceID: device.deviceID, name: device.name, driver: device.driver,
                                                   kind: SourceKind(wire: device.kind) ?? .v4l2,
                                                   formats: device.formats.map(VideoFormat.init(wire:))),
                    activeFormatIndex: Int(device.activeFormatIndex), activeFrameRate: device.activeFrameRate)
            })
        do {
            let outcome = try await store.registerNode(registration, at: Date().unixMilliseconds)
            for device in hello.devices {
                let stored = try await store.device(device.deviceID)
                ingest.admit(deviceID: device.deviceID, nodeID: hello.nodeID,
                             resumingFrames: UInt64(stored?.framesReceived ?? 0), bytes: UInt64(stored?.bytesReceived ?? 0))
            }
            sessions[hello.nodeID] = NodeSession(routingID: routed.routingID)
            reply(routed, .with { $0.welcome = .with {
                $0.status = .ok
                $0.coordinatorID = coordinatorID
                $0.frameIngestPort = UInt32(configuration.frameIngestPort)
                $0.heartbeatIntervalMs = configuration.heartbeatIntervalMilliseconds
                $0.heartbeatLiveness = configuration.heartbeatLiveness
                $0.protocolVersion = WireDefaults.protocolMajor
            } })
            logger.info("node registered", metadata: ["node.id": "\(hello.nodeID)", "node.name": "\(hello.nodeName)",
                                                      "devices": "\(hello.devices.count)", "peer": "\(routed.peer)"])
            events.emit(.nodeRegistered, nodeID: hello.nodeID, message: "\(hello.nodeName) registered \(hello.devices.count) device(s) from \(routed.peer)")
            for deviceID in outcome.addedDeviceIDs {
                events.emit(.deviceAdded, nodeID: hello.nodeID, deviceID: deviceID, message: "new device \(deviceID)")
            }
            if liveness.heard(from: hello.nodeID, at: MonotonicTime.now()) != nil {
                events.emit(.nodeOnline, nodeID: hello.nodeID, message: "\(hello.nodeName) is online")
            }
        } catch {
            logger.error("registration failed", metadata: ["node.id": "\(hello.nodeID)", "error": "\(error)"])
            reply(routed, .with { $0.welcome = .with {
                $0.status = .failure(.internal, "the coordinator could not record the registration: \(error)")
                $0.coordinatorID = coordinatorID
            } })
        }
    }

    /// A sign of life from a registered node; an unknown node is told to register.
    private func heard(from nodeID: String, routed: RoutedMessage) async -> Bool {
        guard var session = sessions[nodeID] else {
            rejections.reject(endpoint: Self.endpointName, reason: .unregisteredNode, peer: routed.peer, detail: "node \(nodeID)")
            reply(routed, .with { $0.reregister = .failure(.notRegistered, "node \(nodeID) is not registered with this coordinator: send HELLO") })
            return false
        }
        session.routingID = routed.routingID
        sessions[nodeID] = session
        if liveness.heard(from: nodeID, at: MonotonicTime.now()) != nil {
            do {
                try await store.setNodeOnline(nodeID, online: true, at: Date().unixMilliseconds)
            } catch {
                logger.error("cannot record node online", metadata: ["node.id": "\(nodeID)", "error": "\(error)"])
            }
            events.emit(.nodeOnline, nodeID: nodeID, message: "node \(nodeID) is back online")
        }
        return true
    }

    /// Marks silent nodes offline. Called a few times a second.
    func expireSilentNodes() async {
        for transition in liveness.expire(at: MonotonicTime.now()) {
            guard case let .wentOffline(nodeID) = transition else { continue }
            logger.warning("node went offline", metadata: ["node.id": "\(nodeID)"])
            do {
                try await store.setNodeOnline(nodeID, online: false, at: Date().unixMilliseconds)
            } catch {
                logger.error("cannot record node offline", metadata: ["node.id": "\(nodeID)", "error": "\(error)"])
            }
            events.emit(.nodeOffline, nodeID: nodeID, message: "node \(nodeID) missed \(configuration.heartbeatLiveness) heartbeats")
        }
    }

    /// Pushes a command to the node that has the device and waits for its reply. An offline
    /// node, or one that does not answer within `timeout`, gets `STATUS_CODE_UNAVAILABLE`.
    func command(_ action: Capfleet_V1_Command.OneOf_Action, deviceID: String, nodeID: String,
                 timeout: Duration = .seconds(3)) async -> Capfleet_V1_CommandReply {
        guard let session = sessions[nodeID], liveness.isOnline(nodeID) else {
            return .with { $0.status = .failure(.unavailable, "node \(nodeID) is offline; the command was not sent") }
        }
        let id = nextCommandID
        nextCommandID += 1
        let message = Capfleet_V1_CoordinatorMessage.with {
            $0.command = .with {
                $0.commandID = id
                $0.deviceID = deviceID
                $0.action = action
            }
        }
        Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.timeOut(id, nodeID: nodeID, timeout: timeout)
        }
        return await withCheckedContinuation { continuation in
            pendingCommands[id] = continuation
            if let bytes: [UInt8] = try? message.serializedBytes() {
                endpoint.reply(to: session.routingID, parts: [bytes])
            }
        }
    }

    private func timeOut(_ id: UInt64, nodeID: String, timeout: Duration) {
        pendingCommands.removeValue(forKey: id)?.resume(returning: .with {
            $0.commandID = id
            $0.status = .failure(.unavailable, "node \(nodeID) did not answer within \(timeout); the command may or may not have been applied")
        })
    }

    func forgetSession(_ nodeID: String) {
        sessions[nodeID] = nil
        _ = liveness.remove(nodeID)
    }

    private func refuse(_ routed: RoutedMessage, _ reason: InputRejection, _ detail: String) {
        rejections.reject(endpoint: Self.endpointName, reason: reason, peer: routed.peer, detail: detail)
        reply(routed, .with { $0.error = .failure(.badRequest, "\(reason.rawValue): \(detail)") })
    }

    private func reply(_ routed: RoutedMessage, _ message: Capfleet_V1_CoordinatorMessage) {
        guard let bytes: [UInt8] = try? message.serializedBytes() else { return }
        endpoint.reply(to: routed.routingID, parts: [bytes])
    }
}
