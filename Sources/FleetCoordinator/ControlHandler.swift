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
    private let alerts: AlertCenter
    private let rejections: RejectionCounter
    private let logger: Logger
    private let coordinatorID: String
    private var liveness: NodeLiveness
    private(set) var sessions: [String: NodeSession] = [:]
    private var pendingCommands: [UInt64: CheckedContinuation<Capfleet_V1_CommandReply, Never>] = [:]
    private var nextCommandID: UInt64 = 1
    private var commandTargets: [UInt64: (nodeID: String, deviceID: String)] = [:]

    init(configuration: CoordinatorConfiguration, store: FleetDatabase, endpoint: RouterEndpoint, ingest: FrameIngest,
         events: FleetEvents, alerts: AlertCenter, rejections: RejectionCounter, coordinatorID: String, logger: Logger) {
        self.alerts = alerts
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
            if let target = commandTargets.removeValue(forKey: reply.commandID) { noteReply(reply, deviceID: target.deviceID, nodeID: target.nodeID) }
            // A reply to a command that already timed out is dropped.
            pendingCommands.removeValue(forKey: reply.commandID)?.resume(returning: reply)
        case let .deviceEvent(event)?:
            guard let nodeID = sessions.first(where: { $0.value.routingID == routed.routingID })?.key else {
                refuse(routed, .unregisteredNode, "a device event from a peer that has not registered")
                return
            }
            await record(event, from: nodeID)
        case let .pressureChange(report)?:
            guard let nodeID = sessions.first(where: { $0.value.routingID == routed.routingID })?.key, nodeID == report.nodeID else {
                refuse(routed, .unregisteredNode, "a pressure report from a peer that has not registered as \(report.nodeID)")
                return
            }
            // Kept as the node's latest even before its first status arrives.
            var status = sessions[nodeID]?.lastStatus ?? Capfleet_V1_AgentStatus.with { $0.nodeID = nodeID }
            status.pressure = report
            sessions[nodeID]?.lastStatus = status
            await recordPressureChange(report)
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
                    description: DeviceDescription(wire: device),
                    activeFormatIndex: Int(device.activeFormatIndex), activeFrameRate: device.activeFrameRate)
            })
        do {
            let outcome = try await store.registerNode(registration, at: Date().unixMilliseconds)
            for device in hello.devices {
                try await store.saveDescriptor(deviceID: device.deviceID, bytes: Data(try device.serializedBytes() as [UInt8]))
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
            // Policies live in the coordinator: a restarted agent gets them again.
            let nodeID = hello.nodeID
            let deviceIDs = hello.devices.map(\.deviceID)
            Task { await self.pushPolicies(nodeID: nodeID, deviceIDs: deviceIDs) }
        } catch {
            logger.error("registration failed", metadata: ["node.id": "\(hello.nodeID)", "error": "\(error)"])
            reply(routed, .with { $0.welcome = .with {
                $0.status = .failure(.internal, "the coordinator could not record the registration: \(error)")
                $0.coordinatorID = coordinatorID
            } })
        }
    }

    private func pushPolicies(nodeID: String, deviceIDs: [String]) async {
        for deviceID in deviceIDs {
            if let record = try? await store.pressurePolicy(deviceID: deviceID), record.enabled,
               let level = PressureLevel(rawValue: record.level) {
                let policy = PressurePolicy(isEnabled: true, level: level, frameRate: record.frameRate)
                let answer = await command(.setPressurePolicy(.with { $0.policy = policy.wire() }), deviceID: deviceID, nodeID: nodeID)
                if answer.status.code != .ok {
                    logger.warning("cannot restore the pressure policy", metadata: ["device.id": "\(deviceID)", "reason": "\(answer.status.reason)"])
                }
            }
            guard let record = try? await store.dropRecoveryPolicy(deviceID: deviceID), record.enabled else { continue }
            let policy = DropRecoveryPolicy(isEnabled: true, minimumFramesPerSecond: record.minimumFps, lateDropShare: record.lateDropShare,
                                            quietIntervalsToRestore: record.quietSeconds)
            let answer = await command(.setDropRecovery(.with { $0.policy = policy.wire }), deviceID: deviceID, nodeID: nodeID)
            if answer.status.code != .ok {
                logger.warning("cannot restore the drop-recovery policy", metadata: ["device.id": "\(deviceID)", "reason": "\(answer.status.reason)"])
            }
        }
    }

    /// Interruptions and policy actions: published at once and audited.
    private func record(_ event: Capfleet_V1_DeviceEvent, from nodeID: String) async {
        let (kind, action, detail): (Capfleet_V1_EventKind, String, String) = switch event.kind {
        case .interrupted:
            (.deviceInterrupted, "device.interrupted", "\(InterruptionReason(wire: event.interruption.reason)?.rawValue ?? "unknown"): \(event.interruption.message)")
        case .resumed: (.deviceResumed, "device.resumed", event.message)
        case .policyActed: (.policyActed, "policy.acted", event.message)
        default: (.unspecified, "device.event", event.message)
        }
        logger.notice("device event", metadata: ["node.id": "\(nodeID)", "device.id": "\(event.deviceID)", "event": "\(action)", "detail": "\(detail)"])
        events.emit(kind, nodeID: nodeID, deviceID: event.deviceID, message: detail)
        if kind == .deviceInterrupted { alerts.deviceInterrupted(event.deviceID, nodeID: nodeID, message: "interrupted: \(detail)") }
        do {
            try await store.appendAudit(AuditEntry(at: Date().unixMilliseconds, actor: "agent:\(nodeID)", action: action,
                                                   target: event.deviceID, outcome: "ok", detail: detail))
        } catch {
            logger.error("cannot audit a device event", metadata: ["device.id": "\(event.deviceID)", "error": "\(error)"])
        }
    }

    /// A node's pressure level changed: published at once (its topic and an event) and audited.
    private func recordPressureChange(_ report: Capfleet_V1_PressureReport) async {
        let from = PressureLevel(wire: report.previousLevel)?.description ?? "unknown"
        let to = PressureLevel(wire: report.level)?.description ?? "unknown"
        let factors = report.factors.map { "\($0.factor) \(PressureLevel(wire: $0.level)?.description ?? "?")" }.joined(separator: ", ")
        var detail = "\(from) → \(to)" + (factors.isEmpty ? "" : " (\(factors))")
        let drops = DropTally(wire: report.intervalDrops)
        if drops.total > 0 {
            let reasons = [("late", drops.late), ("out_of_buffers", drops.outOfBuffers), ("discontinuity", drops.discontinuity)]
                .filter { $0.1 > 0 }.map { "\($0.1) \($0.0)" }.joined(separator: ", ")
            detail += "; lost \(drops.total) of \(drops.total + report.intervalFrames) frames in the last interval: \(reasons)"
        }
        logger.notice("pressure level changed", metadata: ["node.id": "\(report.nodeID)", "pressure": "\(detail)"])
        events.publishPressure(report)
        events.emit(.pressureLevelChanged, nodeID: report.nodeID, message: detail)
        if let level = PressureLevel(wire: report.level) {
            alerts.pressureChanged(nodeID: report.nodeID, from: PressureLevel(wire: report.previousLevel), to: level, detail: detail)
        }
        do {
            try await store.appendAudit(AuditEntry(at: Date().unixMilliseconds, actor: "agent:\(report.nodeID)", action: "pressure.level",
                                                   target: report.nodeID, outcome: "ok", detail: detail))
        } catch {
            logger.error("cannot audit a pressure change", metadata: ["node.id": "\(report.nodeID)", "error": "\(error)"])
        }
    }

    /// What the device's agent said of it in its latest status.
    func counters(of deviceID: String, nodeID: String) -> Capfleet_V1_DeviceCounters? {
        sessions[nodeID]?.lastStatus?.devices.first { $0.deviceID == deviceID }
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
            let message = "node \(nodeID) missed \(configuration.heartbeatLiveness) heartbeats"
            events.emit(.nodeOffline, nodeID: nodeID, message: message)
            alerts.nodeOffline(nodeID, message: message)
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
        commandTargets[id] = (nodeID, deviceID)
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

    /// A command reply is newer than the last status: what it says of the device replaces it.
    private func noteReply(_ reply: Capfleet_V1_CommandReply, deviceID: String, nodeID: String) {
        guard var status = sessions[nodeID]?.lastStatus,
              let index = status.devices.firstIndex(where: { $0.deviceID == deviceID }) else { return }
        status.devices[index].activeFrameRate = reply.activeFrameRate
        status.devices[index].activeMinFrameRate = reply.activeMinFrameRate
        status.devices[index].zoomFactor = reply.zoomFactor
        if reply.hasFocus { status.devices[index].focus = reply.focus }
        if reply.hasDropRecovery { status.devices[index].dropRecovery = reply.dropRecovery }
        if reply.hasPressurePolicy { status.devices[index].pressurePolicy = reply.pressurePolicy }
        sessions[nodeID]?.lastStatus = status
    }

    private func timeOut(_ id: UInt64, nodeID: String, timeout: Duration) {
        commandTargets[id] = nil
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
