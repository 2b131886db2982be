import FleetBus
import FleetCore
import FleetProtocol
import FleetStore
import Foundation
import Logging

/// A registered node as listings see it: where it is reached and what its latest status said.
struct NodeSession: Sendable {
    let routingID: [UInt8]
    let recentRoutingIDs: [[UInt8]]
    let lastStatus: Capfleet_V1_AgentStatus?
}

/// The coordinator's side of the control dialog (registration, heartbeats, status):
/// turns agents' messages into store writes, liveness updates, events and replies.
actor ControlHandler: AgentCommands {
    static let endpointName = "control"

    let configuration: CoordinatorConfiguration
    let store: FleetDatabase
    let endpoint: RouterEndpoint
    let arrivals: ArrivalLedger
    let ingest: FrameIngest
    let events: FleetEvents
    let alerts: AlertCenter
    let rejections: RejectionCounter
    let gate: AccessGate
    let logger: Logger
    let coordinatorID: String
    let fleetTime: FleetTimeSource
    let clock: CoordinatorClock
    /// Sessions, liveness and commands in flight: every decision about them is the book's.
    var book: NodeSessionBook
    var clockWatch = ClockSyncWatch()
    /// Each registered node's latest status, with what events and replies said since.
    var lastStatus: [String: Capfleet_V1_AgentStatus] = [:]
    /// Who waits for each command in flight; the book says when and how it is answered.
    private var waiting: [UInt64: CheckedContinuation<Capfleet_V1_CommandReply, Never>] = [:]
    /// Where registrations, nodes gone silent, device events and detections are told: takes,
    /// live flow and detections read it.
    let nodeEvents: NodeEventFeed
    /// The recording path's bound port, for WELCOME.
    let recordPort: UInt16

    init(
        configuration: CoordinatorConfiguration, store: FleetDatabase, endpoint: RouterEndpoint, arrivals: ArrivalLedger, ingest: FrameIngest,
        events: FleetEvents, alerts: AlertCenter, rejections: RejectionCounter, gate: AccessGate, coordinatorID: String,
        fleetTime: FleetTimeSource, clock: CoordinatorClock, nodeEvents: NodeEventFeed, recordPort: UInt16, logger: Logger
    ) {
        self.nodeEvents = nodeEvents
        self.recordPort = recordPort
        self.fleetTime = fleetTime
        self.clock = clock
        self.alerts = alerts
        self.gate = gate
        self.configuration = configuration
        self.store = store
        self.endpoint = endpoint
        self.arrivals = arrivals
        self.ingest = ingest
        self.events = events
        self.rejections = rejections
        self.coordinatorID = coordinatorID
        self.logger = logger
        book = NodeSessionBook(
            heartbeatIntervalNanoseconds: UInt64(configuration.heartbeatIntervalMilliseconds) * 1_000_000,
            liveness: UInt64(configuration.heartbeatLiveness))
    }

    func isOnline(_ nodeID: String) -> Bool { book.isOnline(nodeID) }

    /// Of `nodeIDs`, those online, with their latest status: a listing of hundreds of
    /// devices asks this once, not once a device.
    func liveStatus(of nodeIDs: Set<String>) -> [String: Capfleet_V1_AgentStatus] {
        var live: [String: Capfleet_V1_AgentStatus] = [:]
        for nodeID in nodeIDs where book.isOnline(nodeID) { live[nodeID] = lastStatus[nodeID] ?? Capfleet_V1_AgentStatus() }
        return live
    }

    /// Tells an online node which of its devices' full-rate frames are wanted; an offline one
    /// hears it when it registers.
    func tell(_ nodeID: String, _ liveFrames: Capfleet_V1_LiveFrames) {
        guard let session = book.session(nodeID), book.isOnline(nodeID) else { return }
        do {
            let bytes: [UInt8] = try Capfleet_V1_CoordinatorMessage.with { $0.liveFrames = liveFrames }.serializedBytes()
            endpoint.reply(to: session.routingID, parts: [bytes])
        } catch {
            logger.error("could not encode live_frames", metadata: ["node.id": "\(nodeID)", "error": "\(error)"])
        }
    }

    func session(_ nodeID: String) -> NodeSession? {
        book.session(nodeID).map { NodeSession(routingID: $0.routingID, recentRoutingIDs: $0.recentRoutingIDs, lastStatus: lastStatus[nodeID]) }
    }

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
        // Who sent it is what ZAP admitted, never what the message claims.
        let sender: (nodeID: String, key: String)
        switch Principal(userID: routed.userID) {
        case let .enrollment(tokenKey)?:
            guard case let .enroll(enroll)? = message.body else {
                refuse(routed, .badToken, "an enrollment token's connection may only send Enroll")
                return
            }
            await self.enroll(enroll, tokenKey: tokenKey, from: routed)
            return
        case let .node(id, key)?:
            guard !gate.isRevoked(key: key) else {
                rejections.reject(endpoint: Self.endpointName, reason: .revokedKey, peer: routed.peer, detail: "a message from revoked node \(id)")
                return
            }
            gate.noteConnection(nodeID: id, fd: routed.sourceFD, peer: routed.peer)
            sender = (id, key)
        default:
            refuse(routed, .wrongIdentity, "the connection is not a node's")
            return
        }
        if let claimed = Self.claimedNodeID(message.body), claimed != sender.nodeID {
            refuse(routed, .wrongIdentity, "node \(sender.nodeID) sent a message as node \(claimed)")
            return
        }
        switch message.body {
        case let .hello(hello)?:
            await register(hello, from: routed)
        case .enroll?:
            refuse(routed, .badToken, "node \(sender.nodeID) is enrolled already; Enroll comes only with a token's key")
        case let .heartbeat(heartbeat)?:
            guard await heard(from: heartbeat.nodeID, routed: routed) else { return }
            reply(routed, .with { $0.heartbeatAck = .with { $0.sequence = heartbeat.sequence } })
        case .status(var status)?:
            guard await heard(from: status.nodeID, routed: routed) else { return }
            // A status standing for a heartbeat (our WELCOME said status_heartbeats) gets its ack.
            if status.heartbeatSequence > 0 {
                reply(routed, .with { $0.heartbeatAck = .with { $0.sequence = status.heartbeatSequence } })
            }
            // A node reports on its own devices only; anything else in its status is ignored.
            status.devices.removeAll { ingest.state(of: $0.deviceID)?.nodeID != sender.nodeID }
            lastStatus[status.nodeID] = status
            if status.hasClock, let change = clockWatch.reported(status.clock, nodeID: status.nodeID) { await recordClockChange(change) }
            for device in status.devices { ingest.noteAgentStatus(device) }
            // Takes' sync reports are made from these, never from frames.
            if !status.devices.isEmpty {
                let samples = status.devices.map { TakeSyncSample($0, nodeID: status.nodeID, clock: status.clock) }
                nodeEvents.publish(.status(samples: samples, atFleetNs: clock.fleetNow()))
            }
        case let .commandReply(reply)?:
            switch book.replied(commandID: reply.commandID, from: sender.nodeID) {
            case let .deliver(command):
                noteReply(reply, deviceID: command.deviceID, nodeID: command.nodeID)
                waiting.removeValue(forKey: reply.commandID)?.resume(returning: reply)
            case let .wrongNode(command):
                // Only the node a command went to may answer it.
                refuse(routed, .wrongIdentity, "node \(sender.nodeID) answered command \(reply.commandID), which went to node \(command.nodeID)")
            case .late:
                // Its waiter was answered already (timed out, or the node restarted or went offline).
                logger.info("late command reply dropped", metadata: ["node.id": "\(sender.nodeID)", "command.id": "\(reply.commandID)"])
            }
        case let .deviceEvent(event)?:
            let nodeID = sender.nodeID
            guard book.session(nodeID) != nil else {
                refuse(routed, .unregisteredNode, "a device event from node \(nodeID), which has not registered")
                return
            }
            guard ingest.state(of: event.deviceID)?.nodeID == nodeID else {
                refuse(routed, .wrongIdentity, "node \(nodeID) sent an event for device \(event.deviceID), which is not its own")
                return
            }
            // The event is newer than the last status: listings say what it says at once.
            if var status = lastStatus[nodeID], let index = status.devices.firstIndex(where: { $0.deviceID == event.deviceID }) {
                switch event.kind {
                case .interrupted:
                    status.devices[index].interruption = event.interruption
                    status.devices[index].streaming = false
                case .resumed:
                    status.devices[index].interruption = Capfleet_V1_Interruption()
                case .zoomChanged:
                    status.devices[index].zoomFactor = event.zoomFactor
                default: break
                }
                lastStatus[nodeID] = status
            }
            await record(event, from: nodeID)
        case let .pressureChange(report)?:
            let nodeID = sender.nodeID
            guard book.session(nodeID) != nil else {
                refuse(routed, .unregisteredNode, "a pressure report from node \(nodeID), which has not registered")
                return
            }
            // Kept as the node's latest even before its first status arrives.
            var status = lastStatus[nodeID] ?? Capfleet_V1_AgentStatus.with { $0.nodeID = nodeID }
            status.pressure = report
            lastStatus[nodeID] = status
            await recordPressureChange(report)
        case let .detection(report)?:
            let nodeID = sender.nodeID
            guard book.session(nodeID) != nil else {
                refuse(routed, .unregisteredNode, "a detection report from node \(nodeID), which has not registered")
                return
            }
            guard ingest.state(of: report.deviceID)?.nodeID == nodeID, report.nodeID == nodeID else {
                refuse(routed, .wrongIdentity, "node \(nodeID) sent detections for device \(report.deviceID), which is not its own")
                return
            }
            nodeEvents.publish(.detection(report))
        case let .sensorData(batch)?:
            let nodeID = sender.nodeID
            guard book.session(nodeID) != nil else {
                refuse(routed, .unregisteredNode, "sensor readings from node \(nodeID), which has not registered")
                return
            }
            guard ingest.state(of: batch.deviceID)?.nodeID == nodeID, batch.nodeID == nodeID,
                SensorStreamName.problem(with: batch.stream) == nil,
                batch.deviceID.hasSuffix("-" + batch.stream)
            else {
                refuse(
                    routed, .wrongIdentity,
                    "node \(nodeID) sent readings of stream \(batch.stream.prefix(40)) as device \(batch.deviceID), which is not its own")
                return
            }
            nodeEvents.publish(.sensorData(batch))
        case nil:
            refuse(routed, .unknownMessage, "the AgentMessage carries no body this coordinator knows")
        }
    }

    /// The node id a message names, where it names one.
    private static func claimedNodeID(_ body: Capfleet_V1_AgentMessage.OneOf_Body?) -> String? {
        switch body {
        case let .hello(hello)?: hello.nodeID
        case let .heartbeat(heartbeat)?: heartbeat.nodeID
        case let .status(status)?: status.nodeID
        case let .pressureChange(report)?: report.nodeID
        default: nil
        }
    }

    /// An admin revoked the node: tell it, forget its session, mark it offline. The gate
    /// drops its messages from now on and closes its connections.
    func revoked(nodeID: String, keys: [String], reason: String) async {
        if let session = book.session(nodeID),
            let bytes: [UInt8] = try? Capfleet_V1_CoordinatorMessage.with({
                $0.revoked = .failure(
                    .permissionDenied,
                    "an admin revoked this node\(reason.isEmpty ? "" : ": \(reason)"); enroll it again with a new token to bring it back")
            }).serializedBytes()
        {
            for routingID in session.recentRoutingIDs { endpoint.reply(to: routingID, parts: [bytes]) }
        }
        gate.revoke(keys: keys, nodeID: nodeID)
        let wentOffline = forgetSession(nodeID)
        do {
            try await store.setNodeOnline(nodeID, online: false, at: clock.unixMilliseconds())
        } catch {
            logger.error("cannot record node offline", metadata: ["node.id": "\(nodeID)", "error": "\(error)"])
        }
        if wentOffline { events.emit(.nodeOffline, nodeID: nodeID, message: "node \(nodeID) was revoked") }
    }

    /// A sign of life from a registered node; an unknown node is told to register.
    private func heard(from nodeID: String, routed: RoutedMessage) async -> Bool {
        guard let actions = book.heard(from: nodeID, routingID: routed.routingID, now: clock.monotonicNow()) else {
            rejections.reject(endpoint: Self.endpointName, reason: .unregisteredNode, peer: routed.peer, detail: "node \(nodeID)")
            if book.shouldAskToRegister(nodeID, now: clock.monotonicNow()) {
                reply(
                    routed, .with { $0.reregister = .failure(.notRegistered, "node \(nodeID) is not registered with this coordinator: send HELLO") })
            }
            return false
        }
        if actions.contains(.cameOnline(nodeID: nodeID)) {
            do {
                try await store.setNodeOnline(nodeID, online: true, at: clock.unixMilliseconds())
            } catch {
                logger.error("cannot record node online", metadata: ["node.id": "\(nodeID)", "error": "\(error)"])
            }
            events.emit(.nodeOnline, nodeID: nodeID, message: "node \(nodeID) is back online")
        }
        return true
    }

    /// Marks silent nodes offline and answers the commands they, or any node, left past their
    /// deadline. Called a few times a second.
    func expireSilentNodes() async {
        // What arrived but waits behind a slow message counts as heard.
        for (nodeID, arrivedAt) in arrivals.latest() { book.arrived(from: nodeID, at: arrivedAt) }
        let actions = book.tick(now: clock.monotonicNow())
        answerInNodesPlace(actions)
        for case let .wentOffline(nodeID) in actions {
            logger.warning("node went offline", metadata: ["node.id": "\(nodeID)"])
            nodeEvents.publish(.offline(nodeID: nodeID))
            do {
                try await store.setNodeOnline(nodeID, online: false, at: clock.unixMilliseconds())
            } catch {
                logger.error("cannot record node offline", metadata: ["node.id": "\(nodeID)", "error": "\(error)"])
            }
            let message = "node \(nodeID) missed \(configuration.heartbeatLiveness) heartbeats"
            events.emit(.nodeOffline, nodeID: nodeID, message: message)
            alerts.nodeOffline(nodeID, message: message)
        }
    }

    /// Pushes a command to the node that has the device and waits for its answer. An offline
    /// node gets `STATUS_CODE_UNAVAILABLE` at once; so does a command the node can no longer
    /// answer (past `timeout`, or the node went offline, restarted or was revoked meanwhile).
    func command(
        _ action: Capfleet_V1_Command.OneOf_Action, deviceID: String, nodeID: String,
        timeout: Duration = .seconds(3)
    ) async -> Capfleet_V1_CommandReply {
        let timeoutNanoseconds = UInt64(timeout.components.seconds) * 1_000_000_000 + UInt64(timeout.components.attoseconds / 1_000_000_000)
        switch book.dispatch(to: nodeID, deviceID: deviceID, timeoutNanoseconds: timeoutNanoseconds, now: clock.monotonicNow()) {
        case .nodeOffline:
            return .with { $0.status = .failure(.unavailable, "node \(nodeID) is offline; the command was not sent") }
        case let .send(id, routingID):
            let message = Capfleet_V1_CoordinatorMessage.with {
                $0.command = .with {
                    $0.commandID = id
                    $0.deviceID = deviceID
                    $0.action = action
                }
            }
            let bytes: [UInt8]
            do {
                bytes = try message.serializedBytes()
            } catch {
                _ = book.replied(commandID: id, from: nodeID)
                return .with { $0.status = .failure(.internal, "the coordinator could not encode the command for node \(nodeID): \(error)") }
            }
            return await withCheckedContinuation { continuation in
                waiting[id] = continuation
                endpoint.reply(to: routingID, parts: [bytes])
            }
        }
    }

    /// The commands the book answers in the node's place: their waiters hear why now.
    func answerInNodesPlace(_ actions: [NodeSessionBook.Action]) {
        for case let .answerUnavailable(command, why) in actions {
            waiting.removeValue(forKey: command.commandID)?.resume(
                returning: .with {
                    $0.commandID = command.commandID
                    $0.status = .failure(.unavailable, why.message(nodeID: command.nodeID))
                })
        }
    }

    /// A command reply is newer than the last status: what it says of the device replaces it.
    private func noteReply(_ reply: Capfleet_V1_CommandReply, deviceID: String, nodeID: String) {
        guard var status = lastStatus[nodeID],
            let index = status.devices.firstIndex(where: { $0.deviceID == deviceID })
        else { return }
        status.devices[index].activeFrameRate = reply.activeFrameRate
        status.devices[index].activeMinFrameRate = reply.activeMinFrameRate
        status.devices[index].zoomFactor = reply.zoomFactor
        if reply.hasFocus { status.devices[index].focus = reply.focus }
        if reply.hasDropRecovery { status.devices[index].dropRecovery = reply.dropRecovery }
        if reply.hasPressurePolicy { status.devices[index].pressurePolicy = reply.pressurePolicy }
        if reply.consent != .unspecified { status.devices[index].consent = reply.consent }
        lastStatus[nodeID] = status
    }

    /// An operator removes the node from the fleet: only while it is offline and not
    /// registering; it cannot register until `endRemoval`.
    func beginRemoval(_ nodeID: String) -> Bool {
        book.beginRemoval(of: nodeID)
    }

    /// The store removed the node (`removed`), or refused to.
    func endRemoval(_ nodeID: String, removed: Bool) {
        let actions = book.endRemoval(of: nodeID, removed: removed)
        answerInNodesPlace(actions)
        guard removed else { return }
        lastStatus[nodeID] = nil
        clockWatch.forget(nodeID)
        arrivals.forget(nodeID)
    }

    /// The node's session ends (revoked, or removed from the fleet); its commands in flight
    /// are answered. True when it was online until now.
    @discardableResult
    func forgetSession(_ nodeID: String) -> Bool {
        let actions = book.forget(nodeID)
        answerInNodesPlace(actions)
        lastStatus[nodeID] = nil
        clockWatch.forget(nodeID)
        arrivals.forget(nodeID)
        return actions.contains(.wentOffline(nodeID: nodeID))
    }

    func refuse(_ routed: RoutedMessage, _ reason: InputRejection, _ detail: String) {
        rejections.reject(endpoint: Self.endpointName, reason: reason, peer: routed.peer, detail: detail)
        reply(routed, .with { $0.error = .failure(.badRequest, "\(reason.rawValue): \(detail)") })
    }

    func reply(_ routed: RoutedMessage, _ message: Capfleet_V1_CoordinatorMessage) {
        guard let bytes: [UInt8] = try? message.serializedBytes() else { return }
        endpoint.reply(to: routed.routingID, parts: [bytes])
    }
}
