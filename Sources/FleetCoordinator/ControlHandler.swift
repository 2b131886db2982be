import FleetBus
import FleetCore
import FleetProtocol
import FleetStore
import Foundation
import Logging

/// A node registered with this coordinator process: where to reach it (the ROUTER
/// routing id of its latest message) and what its latest status said.
struct NodeSession: Sendable {
    var routingID: [UInt8] {
        didSet {
            // Every connection the node spoke on lately, so that a revocation reaches all of them.
            recentRoutingIDs.removeAll { $0 == routingID }
            recentRoutingIDs.append(routingID)
            if recentRoutingIDs.count > 4 { recentRoutingIDs.removeFirst() }
        }
    }
    var lastStatus: Capfleet_V1_AgentStatus?
    private(set) var recentRoutingIDs: [[UInt8]]

    init(routingID: [UInt8]) {
        self.routingID = routingID
        recentRoutingIDs = [routingID]
    }
}

/// The coordinator's side of the control dialog (registration, heartbeats, status):
/// turns agents' messages into store writes, liveness updates, events and replies.
actor ControlHandler: AgentCommands {
    static let endpointName = "control"

    private let configuration: CoordinatorConfiguration
    private let store: FleetDatabase
    private let endpoint: RouterEndpoint
    private let arrivals: ArrivalLedger
    private let ingest: FrameIngest
    private let events: FleetEvents
    private let alerts: AlertCenter
    private let rejections: RejectionCounter
    private let gate: AccessGate
    private let logger: Logger
    private let coordinatorID: String
    private let fleetTime: FleetTimeSource
    private let clock: CoordinatorClock
    private var liveness: NodeLiveness
    private var clockWatch = ClockSyncWatch()
    private(set) var sessions: [String: NodeSession] = [:]
    private var pendingCommands: [UInt64: CheckedContinuation<Capfleet_V1_CommandReply, Never>] = [:]
    private var nextCommandID: UInt64 = 1
    private var commandTargets: [UInt64: (nodeID: String, deviceID: String)] = [:]
    /// The recordings' director hears of registrations and nodes gone silent.
    private var takesRegistered: (@Sendable (String) async -> Void)?
    private var takesOffline: (@Sendable (String) async -> Void)?
    private var takesDeviceEvent: (@Sendable (String, String, String) async -> Void)?
    /// The recording path's bound port, for WELCOME.
    private var recordPort: UInt16 = 0

    init(configuration: CoordinatorConfiguration, store: FleetDatabase, endpoint: RouterEndpoint, arrivals: ArrivalLedger, ingest: FrameIngest,
         events: FleetEvents, alerts: AlertCenter, rejections: RejectionCounter, gate: AccessGate, coordinatorID: String,
         fleetTime: FleetTimeSource, clock: CoordinatorClock, logger: Logger) {
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
        liveness = NodeLiveness(heartbeatIntervalNanoseconds: UInt64(configuration.heartbeatIntervalMilliseconds) * 1_000_000,
                                liveness: UInt64(configuration.heartbeatLiveness))
    }

    func isOnline(_ nodeID: String) -> Bool { liveness.isOnline(nodeID) }

    func followTakes(recordPort: UInt16, registered: @escaping @Sendable (String) async -> Void, offline: @escaping @Sendable (String) async -> Void,
                     deviceEvent: @escaping @Sendable (_ deviceID: String, _ kind: String, _ detail: String) async -> Void) {
        self.recordPort = recordPort
        takesDeviceEvent = deviceEvent
        takesRegistered = registered
        takesOffline = offline
    }

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
            // A node reports on its own devices only; anything else in its status is ignored.
            status.devices.removeAll { ingest.state(of: $0.deviceID)?.nodeID != sender.nodeID }
            sessions[status.nodeID]?.lastStatus = status
            if status.hasClock, let change = clockWatch.reported(status.clock, nodeID: status.nodeID) { await recordClockChange(change) }
            for device in status.devices { ingest.noteAgentDrops(deviceID: device.deviceID, drops: DropTally(wire: device.drops), streaming: device.streaming) }
        case let .commandReply(reply)?:
            // Only the node a command went to may answer it.
            if let target = commandTargets[reply.commandID], target.nodeID != sender.nodeID {
                refuse(routed, .wrongIdentity, "node \(sender.nodeID) answered command \(reply.commandID), which went to node \(target.nodeID)")
                return
            }
            if let target = commandTargets.removeValue(forKey: reply.commandID) { noteReply(reply, deviceID: target.deviceID, nodeID: target.nodeID) }
            // A reply to a command that already timed out is dropped.
            pendingCommands.removeValue(forKey: reply.commandID)?.resume(returning: reply)
        case let .deviceEvent(event)?:
            let nodeID = sender.nodeID
            guard sessions[nodeID] != nil else {
                refuse(routed, .unregisteredNode, "a device event from node \(nodeID), which has not registered")
                return
            }
            guard ingest.state(of: event.deviceID)?.nodeID == nodeID else {
                refuse(routed, .wrongIdentity, "node \(nodeID) sent an event for device \(event.deviceID), which is not its own")
                return
            }
            // The event is newer than the last status: listings say what it says at once.
            if var status = sessions[nodeID]?.lastStatus, let index = status.devices.firstIndex(where: { $0.deviceID == event.deviceID }) {
                switch event.kind {
                case .interrupted:
                    status.devices[index].interruption = event.interruption
                    status.devices[index].streaming = false
                case .resumed:
                    status.devices[index].interruption = Capfleet_V1_Interruption()
                default: break
                }
                sessions[nodeID]?.lastStatus = status
            }
            await record(event, from: nodeID)
        case let .pressureChange(report)?:
            let nodeID = sender.nodeID
            guard sessions[nodeID] != nil else {
                refuse(routed, .unregisteredNode, "a pressure report from node \(nodeID), which has not registered")
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

    static func numbersAreFinite(_ device: Capfleet_V1_DeviceDescriptor) -> Bool {
        [device.activeFrameRate, device.activeMinFrameRate].allSatisfy(\.isFinite)
            && device.formats.allSatisfy { format in
                [format.fieldOfViewDegrees, format.maxZoomFactor, format.upscaleThresholdZoomFactor].allSatisfy(\.isFinite)
                    && format.frameRateRanges.allSatisfy { $0.minFps.isFinite && $0.maxFps.isFinite }
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

    /// Spends an enrollment token on the agent's key, or says exactly why not.
    private func enroll(_ enroll: Capfleet_V1_Enroll, tokenKey: String, from routed: RoutedMessage) async {
        guard let nodeKey = CurvePublicKey(bytes: Array(enroll.nodePublicKey)), !enroll.nodeID.isEmpty, enroll.nodeID.count <= 128 else {
            refuse(routed, .undecodable, "Enroll needs a 32-byte node_public_key and a node_id")
            return
        }
        let now = clock.unixMilliseconds()
        let token = String(tokenKey.prefix(8))
        let (nodeID, peer) = (enroll.nodeID, routed.peer)
        let outcome: EnrollmentOutcome
        do {
            outcome = try await store.enroll(tokenKey: tokenKey, nodeKey: nodeKey.z85, nodeID: nodeID, at: now) { outcome in
                let (result, detail): (String, String) = switch outcome {
                case let .enrolled(name): ("ok", "enrolled as \(name) with key \(nodeKey.fingerprint)… using token \(token)… from \(peer)")
                default: ("refused", "token \(token)… from \(peer): \(Self.explain(outcome))")
                }
                return AuditEntry(at: now, actor: "agent:\(nodeID)", action: "node.enroll", target: nodeID, outcome: result, detail: detail)
            }
        } catch {
            logger.error("enrollment failed", metadata: ["node.id": "\(nodeID)", "error": "\(error)"])
            reply(routed, .with { $0.enrolled = .with { $0.status = .failure(.internal, "the coordinator could not record the enrollment: \(error)") } })
            return
        }
        guard case let .enrolled(name) = outcome else {
            rejections.reject(endpoint: Self.endpointName, reason: .badToken, peer: routed.peer, detail: Self.explain(outcome))
            reply(routed, .with { $0.enrolled = .with {
                $0.status = .failure(.permissionDenied, Self.explain(outcome))
                $0.nodeID = nodeID
            } })
            return
        }
        logger.notice("node enrolled", metadata: ["node.id": "\(nodeID)", "node.name": "\(name)", "peer": "\(routed.peer)"])
        events.emit(.nodeEnrolled, nodeID: nodeID, message: "\(name) enrolled from \(routed.peer) (key \(nodeKey.fingerprint)…)")
        reply(routed, .with { $0.enrolled = .with {
            $0.status = .ok
            $0.nodeID = nodeID
            $0.nodeName = name
        } })
    }

    static func explain(_ outcome: EnrollmentOutcome) -> String {
        let format = { (ms: Int64) in Date(timeIntervalSince1970: Double(ms) / 1000).formatted(.iso8601) }
        return switch outcome {
        case let .enrolled(name): "enrolled as \(name)"
        case .unknownToken: "this coordinator never issued that token (forged, or from another coordinator)"
        case let .expired(at): "the token expired at \(format(at)); ask an admin for a new one (capfleet enroll --name NAME)"
        case let .alreadyUsed(at, nodeID): "the token was already used at \(format(at)) by node \(nodeID); tokens work once, ask an admin for a new one"
        case let .nodeAlreadyEnrolled(nodeID): "node \(nodeID) is enrolled with another key; an admin must revoke it first (capfleet nodes revoke \(nodeID))"
        case .keyAlreadyKnown: "this key was enrolled before; the agent must make a fresh key pair to enroll again"
        }
    }

    /// An admin revoked the node: tell it, forget its session, mark it offline. The gate
    /// drops its messages from now on and closes its connections.
    func revoked(nodeID: String, keys: [String], reason: String) async {
        if let session = sessions[nodeID], let bytes: [UInt8] = try? Capfleet_V1_CoordinatorMessage.with({
            $0.revoked = .failure(.permissionDenied, "an admin revoked this node\(reason.isEmpty ? "" : ": \(reason)"); enroll it again with a new token to bring it back")
        }).serializedBytes() {
            for routingID in session.recentRoutingIDs { endpoint.reply(to: routingID, parts: [bytes]) }
        }
        gate.revoke(keys: keys, nodeID: nodeID)
        let wasOnline = liveness.isOnline(nodeID)
        forgetSession(nodeID)
        do {
            try await store.setNodeOnline(nodeID, online: false, at: clock.unixMilliseconds())
        } catch {
            logger.error("cannot record node offline", metadata: ["node.id": "\(nodeID)", "error": "\(error)"])
        }
        if wasOnline { events.emit(.nodeOffline, nodeID: nodeID, message: "node \(nodeID) was revoked") }
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
        // SQLite stores NaN as NULL, which no longer reads back as a number: refuse it here.
        guard hello.devices.allSatisfy(Self.numbersAreFinite) else {
            refuse(routed, .invalidFormat, "HELLO with a frame rate, field of view or zoom factor that is not a finite number")
            return
        }
        // The node is called what the admin named it at enrollment; the devices it lists must
        // not be another online node's (checked against the store: no answer, no registration).
        let enrolledName: String?
        var takenDevice: (deviceID: String, owner: String)?
        do {
            enrolledName = try await store.liveNodeKey(hello.nodeID)?.name
            for device in hello.devices {
                if let owner = try await store.device(device.deviceID)?.nodeId, owner != hello.nodeID, liveness.isOnline(owner) {
                    takenDevice = (device.deviceID, owner)
                    break
                }
            }
        } catch {
            logger.error("registration failed", metadata: ["node.id": "\(hello.nodeID)", "error": "\(error)"])
            reply(routed, .with { $0.welcome = .with {
                $0.status = .failure(.internal, "the coordinator could not read the fleet database to register this node: \(error)")
                $0.coordinatorID = coordinatorID
            } })
            return
        }
        let registration = NodeRegistration(
            nodeID: hello.nodeID, name: enrolledName ?? hello.nodeName, hostname: hello.hostname, softwareVersion: hello.softwareVersion,
            address: routed.peer,
            devices: hello.devices.map { device in
                NodeRegistration.Device(
                    description: DeviceDescription(wire: device),
                    activeFormatIndex: Int(device.activeFormatIndex), activeFrameRate: device.activeFrameRate)
            })
        // A camera may move to another host (its id is stable), but not while the node that
        // has it is online: a node's key must not let it take another node's camera.
        if let (deviceID, owner) = takenDevice {
            rejections.reject(endpoint: Self.endpointName, reason: .wrongIdentity, peer: routed.peer,
                              detail: "node \(hello.nodeID) registered device \(deviceID), which online node \(owner) has")
            reply(routed, .with { $0.welcome = .with {
                $0.status = .failure(.permissionDenied, "device \(deviceID) belongs to node \(owner), which is online; a camera can move to another node only while its old node is offline")
                $0.coordinatorID = coordinatorID
                $0.protocolVersion = WireDefaults.protocolMajor
            } })
            return
        }
        do {
            let outcome = try await store.registerNode(registration, at: clock.unixMilliseconds())
            // The first report after a restart (of either side) is compared with the state stored before.
            clockWatch.registered(hello.nodeID, stored: try await store.clock(nodeID: hello.nodeID)?.wire.sync)
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
                $0.clockPort = UInt32(configuration.clockPort)
                $0.recordPort = UInt32(recordPort)
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
            // Policies and frame alignment live in the coordinator: a restarted agent gets them again.
            let nodeID = hello.nodeID
            let deviceIDs = hello.devices.map(\.deviceID)
            let takesRegistered = self.takesRegistered
            Task {
                await self.pushPolicies(nodeID: nodeID, deviceIDs: deviceIDs)
                await takesRegistered?(nodeID)
            }
        } catch {
            logger.error("registration failed", metadata: ["node.id": "\(hello.nodeID)", "error": "\(error)"])
            reply(routed, .with { $0.welcome = .with {
                $0.status = .failure(.internal, "the coordinator could not record the registration: \(error)")
                $0.coordinatorID = coordinatorID
            } })
        }
    }

    private func pushPolicies(nodeID: String, deviceIDs: [String]) async {
        // Consent first: the agent enforces what it last stored meanwhile (fail-closed), and a
        // device it never heard of stays not determined until it hears otherwise.
        for deviceID in deviceIDs {
            // Unread, the device stays fail-closed (not determined) and someone hears why.
            let record = await policyRead("consent", of: deviceID, nodeID: nodeID) { try await $0.consent(deviceID: deviceID) } ?? nil
            let answer = await command(.setConsent(.with {
                $0.state = (record?.consentState ?? .notDetermined).wire
                $0.reason = record?.reason ?? ""
                $0.changedUnixMs = record?.changedAt ?? 0
            }), deviceID: deviceID, nodeID: nodeID)
            if answer.status.code != .ok {
                logger.warning("cannot push consent", metadata: ["device.id": "\(deviceID)", "reason": "\(answer.status.reason)"])
            }
        }
        for deviceID in deviceIDs {
            if let record = await policyRead("pressure policy", of: deviceID, nodeID: nodeID, { try await $0.pressurePolicy(deviceID: deviceID) }) ?? nil,
               record.enabled,
               let level = PressureLevel(rawValue: record.level) {
                let policy = PressurePolicy(isEnabled: true, level: level, frameRate: record.frameRate)
                let answer = await command(.setPressurePolicy(.with { $0.policy = policy.wire() }), deviceID: deviceID, nodeID: nodeID)
                if answer.status.code != .ok {
                    logger.warning("cannot restore the pressure policy", metadata: ["device.id": "\(deviceID)", "reason": "\(answer.status.reason)"])
                }
            }
            guard let record = await policyRead("drop-recovery policy", of: deviceID, nodeID: nodeID, { try await $0.dropRecoveryPolicy(deviceID: deviceID) }) ?? nil,
                  record.enabled else { continue }
            let policy = DropRecoveryPolicy(isEnabled: true, minimumFramesPerSecond: record.minimumFps, lateDropShare: record.lateDropShare,
                                            quietIntervalsToRestore: record.quietSeconds)
            let answer = await command(.setDropRecovery(.with { $0.policy = policy.wire }), deviceID: deviceID, nodeID: nodeID)
            if answer.status.code != .ok {
                logger.warning("cannot restore the drop-recovery policy", metadata: ["device.id": "\(deviceID)", "reason": "\(answer.status.reason)"])
            }
        }
        // Alignment on or off as last set; on, with this run's grid (the origin an earlier
        // coordinator chose lies in another fleet time).
        for deviceID in deviceIDs {
            guard let setting = await policyRead("frame alignment", of: deviceID, nodeID: nodeID, { try await $0.frameAlignment(deviceID: deviceID) }) ?? nil else { continue }
            let answer = await command(.setFrameAlignment(.with {
                $0.enabled = setting.enabled
                $0.gridOriginFleetNs = fleetTime.alignmentGridOrigin
            }), deviceID: deviceID, nodeID: nodeID)
            if answer.status.code != .ok {
                logger.warning("cannot restore frame alignment", metadata: ["device.id": "\(deviceID)", "reason": "\(answer.status.reason)"])
            }
        }
    }

    /// A device's stored setting, to push again; a read the store refuses is logged as an
    /// error, and the setting is not pushed (the agent keeps what it has; consent stays
    /// fail-closed).
    private func policyRead<T: Sendable>(_ what: String, of deviceID: String, nodeID: String,
                                         _ read: @Sendable (FleetDatabase) async throws -> T) async -> T? {
        do {
            return try await read(store)
        } catch {
            logger.error("cannot read a device's setting to push it again", metadata: ["device.id": "\(deviceID)", "setting": "\(what)", "error": "\(error)"])
            return nil
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
        if kind == .deviceInterrupted || kind == .deviceResumed || kind == .policyActed, let takesDeviceEvent {
            await takesDeviceEvent(event.deviceID, kind == .deviceInterrupted ? "interrupted" : kind == .deviceResumed ? "resumed" : "policy_acted", detail)
        }
        if kind == .deviceInterrupted { alerts.deviceInterrupted(event.deviceID, nodeID: nodeID, message: "interrupted: \(detail)") }
        do {
            try await store.appendAudit(AuditEntry(at: clock.unixMilliseconds(), actor: "agent:\(nodeID)", action: action,
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
                .filter { $0.1 > 0 }.map { (name: String, count: UInt64) -> String in "\(count) \(name)" }.joined(separator: ", ")
            detail += "; lost \(drops.total) of \(drops.total.addingSaturated(report.intervalFrames)) frames in the last interval: \(reasons)"
        }
        logger.notice("pressure level changed", metadata: ["node.id": "\(report.nodeID)", "pressure": "\(detail)"])
        events.publishPressure(report)
        events.emit(.pressureLevelChanged, nodeID: report.nodeID, message: detail)
        if let level = PressureLevel(wire: report.level) {
            alerts.pressureChanged(nodeID: report.nodeID, from: PressureLevel(wire: report.previousLevel), to: level, detail: detail)
        }
        do {
            try await store.appendAudit(AuditEntry(at: clock.unixMilliseconds(), actor: "agent:\(report.nodeID)", action: "pressure.level",
                                                   target: report.nodeID, outcome: "ok", detail: detail))
        } catch {
            logger.error("cannot audit a pressure change", metadata: ["node.id": "\(report.nodeID)", "error": "\(error)"])
        }
    }

    /// A node's clock locked, lost lock or started over: published at once and audited.
    private func recordClockChange(_ change: ClockSyncWatch.Change) async {
        logger.notice("clock state changed", metadata: ["node.id": "\(change.nodeID)", "clock.state": "\(change.to.name ?? "unknown")",
                                                        "detail": "\(change.message)"])
        events.emit(.clockStateChanged, nodeID: change.nodeID, message: change.message)
        do {
            try await store.appendAudit(AuditEntry(at: clock.unixMilliseconds(), actor: "agent:\(change.nodeID)", action: "clock.state",
                                                   target: change.nodeID, outcome: "ok",
                                                   detail: "\(change.from.name ?? "unknown") → \(change.to.name ?? "unknown"): \(change.message)"))
        } catch {
            logger.error("cannot audit a clock state change", metadata: ["node.id": "\(change.nodeID)", "error": "\(error)"])
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
                try await store.setNodeOnline(nodeID, online: true, at: clock.unixMilliseconds())
            } catch {
                logger.error("cannot record node online", metadata: ["node.id": "\(nodeID)", "error": "\(error)"])
            }
            events.emit(.nodeOnline, nodeID: nodeID, message: "node \(nodeID) is back online")
        }
        return true
    }

    /// Marks silent nodes offline. Called a few times a second.
    func expireSilentNodes() async {
        // What arrived but waits behind a slow message counts as heard.
        for (nodeID, arrivedAt) in arrivals.latest() { liveness.refresh(nodeID, arrivedAt: arrivedAt) }
        for transition in liveness.expire(at: MonotonicTime.now()) {
            guard case let .wentOffline(nodeID) = transition else { continue }
            logger.warning("node went offline", metadata: ["node.id": "\(nodeID)"])
            if let takesOffline { Task { await takesOffline(nodeID) } }
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
        if reply.consent != .unspecified { status.devices[index].consent = reply.consent }
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
        clockWatch.forget(nodeID)
        arrivals.forget(nodeID)
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
