import FleetBus
import FleetCore
import FleetProtocol
import FleetStore
import Foundation
import Logging

/// Answers the CLI's requests on the operator endpoint. Every request gets a reply with a
/// status and a reason; actions that change the fleet are written to the audit log.
actor OperatorHandler {
    static let endpointName = "operator"

    let store: FleetDatabase
    let endpoint: RouterEndpoint
    /// Every endpoint's port, as bound.
    let ports: Capfleet_V1_CoordinatorEndpoints
    let ingest: FrameIngest
    let control: ControlHandler
    /// Who wants which devices' full-rate frames: a snapshot wakes its device's flow.
    let liveFlow: LiveFlowKeeper
    let reporter: TelemetryReporter
    let rejections: RejectionCounter
    let leases: LeaseKeeper
    let events: FleetEvents
    let coordinatorKey: CurvePublicKey
    let fleetTime: FleetTimeSource
    /// Every reading of fleet or wall time: a test chooses the time.
    let clock: CoordinatorClock
    let takes: TakeDirector
    /// Takes recorded on the agents: their links (verify, delete) and collect.
    let agentTakes: AgentRecordingsDesk
    let collections: TakeCollections
    let stills: StillDirector
    let backups: DatabaseBackups
    let logger: Logger
    /// Which consent change each device's agent is still to be told (OperatorHandler+Consent).
    var consentRelay = ConsentRelay()
    /// The last consent push to each device, which the next one waits for.
    var consentPushes: [String: Task<Capfleet_V1_CommandReply?, Never>] = [:]

    init(
        store: FleetDatabase, endpoint: RouterEndpoint, ports: Capfleet_V1_CoordinatorEndpoints, ingest: FrameIngest, control: ControlHandler,
        liveFlow: LiveFlowKeeper, reporter: TelemetryReporter, rejections: RejectionCounter, leases: LeaseKeeper, events: FleetEvents,
        coordinatorKey: CurvePublicKey, fleetTime: FleetTimeSource, clock: CoordinatorClock, takes: TakeDirector,
        agentTakes: AgentRecordingsDesk, collections: TakeCollections, stills: StillDirector, backups: DatabaseBackups, logger: Logger
    ) {
        self.stills = stills
        self.coordinatorKey = coordinatorKey
        self.agentTakes = agentTakes
        self.collections = collections
        self.backups = backups
        self.takes = takes
        self.fleetTime = fleetTime
        self.clock = clock
        self.leases = leases
        self.events = events
        self.store = store
        self.endpoint = endpoint
        self.ports = ports
        self.ingest = ingest
        self.control = control
        self.liveFlow = liveFlow
        self.reporter = reporter
        self.rejections = rejections
        self.logger = logger
    }

    /// Requests are handled concurrently: a snapshot waiting for its frame must not hold up
    /// someone else's listing.
    func serve() async {
        await withDiscardingTaskGroup { group in
            for await message in endpoint.messages {
                group.addTask { await self.handle(message) }
            }
        }
    }

    private func handle(_ routed: RoutedMessage) async {
        // A REQ socket's request comes after an empty delimiter; its reply must too.
        let opened = OperatorFraming.open(routed.parts.map(\.array))
        let framing = opened.framing
        guard let bytes = opened.request, !routed.overflowed else {
            rejections.reject(endpoint: Self.endpointName, reason: .wrongPartCount, peer: routed.peer)
            send(
                .with {
                    $0.status = .failure(
                        .badRequest,
                        "an operator request is one part (an OperatorRequest) from a DEALER, "
                            + "or an empty delimiter and that part from a REQ socket; this message had \(routed.parts.count) part(s)")
                }, to: routed, framing: framing)
            return
        }
        // Undecodable input is counted and answered: the sender's mistake, not ours.
        guard let request = try? Capfleet_V1_OperatorRequest(serializedBytes: bytes) else {
            rejections.reject(endpoint: Self.endpointName, reason: .undecodable, peer: routed.peer)
            send(
                .with { $0.status = .failure(.badRequest, "not an OperatorRequest; is the CLI the same version as the coordinator?") }, to: routed,
                framing: framing)
            return
        }
        // Who asks is the key's operator, never the request's own `operator` field.
        guard case let .operator(name)? = Principal(userID: routed.userID) else {
            rejections.reject(
                endpoint: Self.endpointName, reason: .wrongIdentity, peer: routed.peer,
                detail: "a request from a connection that is not an operator's")
            send(
                .with {
                    $0.requestID = request.requestID
                    $0.status = .failure(.permissionDenied, "this connection is not an operator's")
                }, to: routed, framing: framing)
            return
        }
        let (reply, payload) = await answer(request, from: OperatorCaller(name: name, channel: .operatorEndpoint, peer: routed.peer))
        send(reply, to: routed, framing: framing, payload: payload)
    }

    /// One request answered for an operator already identified (by the key on the operator
    /// endpoint, or by a dashboard session): the role is checked against the operator's
    /// record now, and what the request changes is audited under `caller.actor`.
    func answer(_ request: Capfleet_V1_OperatorRequest, from caller: OperatorCaller) async -> (reply: Capfleet_V1_OperatorReply, payload: [UInt8]?) {
        var reply = Capfleet_V1_OperatorReply()
        reply.requestID = request.requestID
        guard let account = await authorize(request, from: caller, into: &reply) else {
            return (reply, nil)
        }
        let who = caller.actor
        var payload: [UInt8]?
        await leases.heard(session: request.sessionID, timeoutMilliseconds: request.sessionTimeoutMs)
        do {
            switch request.body {
            case .listNodes?:
                try await listNodes(into: &reply)
            case let .listDevices(query)?:
                try await listDevices(nodeID: query.nodeID.isEmpty ? nil : query.nodeID, withFormats: query.withFormats, into: &reply)
            case let .getFormats(query)?:
                try await formats(of: query.deviceID, into: &reply)
            case .getFleetStats?:
                reply.deviceStats = await reporter.deviceStatuses
                reply.nodeStats = await reporter.nodeStatuses
                reply.pressure = await reporter.pressureReports
                reply.status = .ok
            case let .getLatestFrame(query)?:
                payload = await nextFrame(of: query.deviceID, into: &reply)
            case let .getPreview(query)?:
                preview(of: query.deviceID, into: &reply)
            case let .listPreviews(query)?:
                listPreviews(nodeID: query.nodeID.isEmpty ? nil : query.nodeID, into: &reply)
            case .getIngestStats?:
                reply.rejections = rejections.counts.map { entry in
                    .with {
                        $0.endpoint = entry.endpoint
                        $0.reason = entry.reason
                        $0.count = entry.count
                    }
                }
                reply.status = .ok
            case let .forgetNode(query)?:
                try await forget(query.nodeID, operator: who, into: &reply)
            case let .changeFormat(query)?:
                try await changeFormat(query, operator: who, into: &reply)
            case let .changeFrameRate(query)?:
                try await changeFrameRate(query, operator: who, into: &reply)
            case let .changeZoom(query)?:
                try await changeZoom(query, operator: who, into: &reply)
            case let .lockDevice(query)?:
                try await lock(query, operator: who, session: request.sessionID, into: &reply)
            case let .changeFocus(query)?:
                try await changeFocus(query, operator: who, into: &reply)
            case let .setDropRecoveryPolicy(query)?:
                try await setDropRecovery(query, operator: who, into: &reply)
            case let .changePressurePolicy(query)?:
                try await changePressurePolicy(query, operator: who, into: &reply)
            case let .getDevice(query)?:
                try await deviceDetails(query.deviceID, into: &reply)
            case let .getEvents(query)?:
                reply.events = events.recent(limit: Int(query.limit == 0 ? 100 : min(query.limit, UInt32(FleetEvents.remembered))))
                reply.status = .ok
            case .endSession?:
                await leases.endSession(request.sessionID)
                reply.status = .ok
            case let .unlockDevice(query)?:
                try await unlock(query, operator: who, into: &reply)
            case let .createEnrollment(query)?:
                try await createEnrollment(query, by: who, into: &reply)
            case let .listEnrollments(query)?:
                try await listEnrollments(query, into: &reply)
            case let .revokeEnrollment(query)?:
                try await revokeEnrollment(query, by: who, into: &reply)
            case let .revokeNode(query)?:
                try await revoke(query, by: who, into: &reply)
            case let .addOperator(query)?:
                try await addOperator(query, by: who, into: &reply)
            case let .removeOperator(query)?:
                try await removeOperator(query.name, by: who, into: &reply)
            case .listOperators?:
                reply.operators = try await store.operators().map(Self.info)
                reply.status = .ok
            case .whoAmI?:
                reply.you = Self.info(account)
                reply.endpoints = ports
                reply.status = .ok
            case let .changeConsent(query)?:
                try await changeConsent(query, by: account, actor: who, into: &reply)
            case let .getConsentHistory(query)?:
                try await consentHistory(of: query.deviceID, into: &reply)
            case let .syncCheck(query)?:
                try await syncCheck(query, into: &reply)
            case let .changeFrameAlignment(query)?:
                try await changeFrameAlignment(query, operator: who, into: &reply)
            case let .startRecording(query)?:
                try await startRecording(query, by: who, into: &reply)
            case let .stopRecording(query)?:
                try await stopRecording(query, by: who, into: &reply)
            case .listRecordings?:
                try await listRecordings(into: &reply)
            case let .getRecording(query)?:
                try await showRecording(query.takeID, into: &reply)
            case let .deleteRecording(query)?:
                try await deleteRecording(query.takeID, by: who, into: &reply)
            case let .collectRecording(query)?:
                try await collectRecording(query.takeID, by: who, into: &reply)
            case let .verifyRecording(query)?:
                try await verifyRecording(query, into: &reply)
            case let .readSegment(query)?:
                try await readSegment(query, into: &reply)
            case let .noteRecording(query)?:
                try await noteRecording(query, by: who, into: &reply)
            case let .backupDatabase(query)?:
                try await backupDatabase(query, by: who, into: &reply)
            case let .createDashboardSignIn(query)?:
                try await createDashboardSignIn(query, by: account, actor: who, into: &reply)
            case let .listDashboardSessions(query)?:
                try await listDashboardSessions(query, into: &reply)
            case let .endDashboardSession(query)?:
                try await endDashboardSession(query, by: who, into: &reply)
            case let .takeStill(query)?:
                try await takeStill(query, by: who, into: &reply)
            case .listStills?:
                try await listStills(into: &reply)
            case let .getStill(query)?:
                try await showStill(query.stillID, into: &reply)
            case let .deleteStill(query)?:
                try await deleteStill(query.stillID, by: who, into: &reply)
            case let .readStillFile(query)?:
                try await readStillFile(query, into: &reply)
            case let .changeDetection(query)?:
                try await changeDetection(query, operator: who, into: &reply)
            case let .setDeviceOptics(query)?:
                try await setDeviceOptics(query, by: who, into: &reply)
            case nil:
                rejections.reject(endpoint: caller.endpointName, reason: .unknownMessage, peer: caller.peer)
                reply.status = .failure(.badRequest, "the request carries no body this coordinator knows; is the CLI newer than the coordinator?")
            }
        } catch {
            logger.error("operator request failed", metadata: ["error": "\(error)"])
            reply.status = .failure(.internal, "\(error)")
        }
        return (reply, payload)
    }

    private func forget(_ nodeID: String, operator who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        let actor = who.isEmpty ? "unknown operator" : who
        let at = clock.unixMilliseconds()
        do throws(StoreError) {
            // Decided by the control handler at once: from here the node cannot register
            // until the removal is done or failed.
            guard await control.beginRemoval(nodeID) else {
                throw StoreError.refused(reason: "node \(nodeID) is online or registering; stop its agent before forgetting it")
            }
            let devices: [String]
            do throws(StoreError) {
                devices = try await store.devices(nodeID: nodeID).map(\.id)
                try await store.forgetNode(nodeID)
            } catch {
                await control.endRemoval(nodeID, removed: false)
                throw error
            }
            await control.endRemoval(nodeID, removed: true)
            ingest.forget(deviceIDs: devices)
            await liveFlow.forgotten(devices)
            try await store.appendAudit(
                AuditEntry(
                    at: at, actor: actor, action: "node.forget", target: nodeID, outcome: "ok",
                    detail: "removed \(devices.count) device(s)"))
            reply.status = .ok
        } catch {
            let (code, outcome): (Capfleet_V1_StatusCode, String) =
                switch error {
                case .notFound: (.notFound, "refused")
                case .refused: (.unsupported, "refused")
                default: (.internal, "failed")
                }
            try await store.appendAudit(
                AuditEntry(
                    at: at, actor: actor, action: "node.forget", target: nodeID, outcome: outcome,
                    detail: error.description))
            reply.status = .failure(code, error.description)
        }
    }

    private func send(_ reply: Capfleet_V1_OperatorReply, to routed: RoutedMessage, framing: OperatorFraming, payload: [UInt8]? = nil) {
        let bytes: [UInt8]
        do {
            bytes = try reply.serializedBytes()
        } catch {
            // Every request gets a reply: one that cannot be encoded becomes a failure that can.
            logger.error("an operator reply could not be encoded", metadata: ["error": "\(error)"])
            var failure = Capfleet_V1_OperatorReply()
            failure.requestID = reply.requestID
            failure.status = .failure(.internal, "the coordinator could not encode its reply: \(error)")
            guard let fallback: [UInt8] = try? failure.serializedBytes() else { return }  // logged just above
            endpoint.reply(to: routed.routingID, parts: framing.wrap([fallback]))
            return
        }
        endpoint.reply(to: routed.routingID, parts: framing.wrap(payload.map { [bytes, $0] } ?? [bytes]))
    }
}
