import FleetBus
import FleetCore
import FleetProtocol
import FleetSystem
import FleetTestSupport
import Foundation
import Logging
import Synchronization
import Testing

@testable import FleetCoordinator
@testable import FleetStore

/// The control handler against a real (in-memory) fleet database, real CURVE sockets and
/// ZAP on 127.0.0.1, and a monotonic clock the test moves: the node is a hand-written agent
/// with an enrolled key.
@Suite(.timeLimit(.minutes(1))) struct ControlHandlerTests {
    @Test func aNodeReconnectingWhileACommandIsInFlight_isAnsweredAtOnceIfItRestarted_andStillAnswersIfItOnlyReconnected() async throws {
        let bed = try await ControlBed()
        defer { bed.close() }
        let agent = bed.agent()
        try await agent.register(instance: "first process")

        // The agent restarts after the command reached it: nobody will answer it.
        let lost = Task { await bed.control.command(.setZoom(.with { $0.factor = 2 }), deviceID: ControlBed.deviceID, nodeID: ControlBed.nodeID) }
        let lostZoom = try await agent.serveUntilZoom()
        try await agent.register(instance: "second process")
        let restarted = await lost.value
        // The clock never moved: no deadline passed, the restart alone answered it.
        #expect(restarted.status.code == .unavailable)
        #expect(restarted.status.reason.contains("restarted before answering"), "\(restarted.status.reason)")
        #expect(restarted.commandID == lostZoom.commandID)
        // Were the old process's answer to come now, it is nobody's.
        try await agent.answer(lostZoom, zoom: 2)

        // The same process on a new connection: its answer still counts.
        let kept = Task { await bed.control.command(.setZoom(.with { $0.factor = 3 }), deviceID: ControlBed.deviceID, nodeID: ControlBed.nodeID) }
        let keptZoom = try await agent.serveUntilZoom()
        try await agent.register(instance: "second process")
        try await agent.answer(keptZoom, zoom: 3)
        let answered = await kept.value
        #expect(answered.status.isOK, "\(answered.status)")
        #expect(answered.zoomFactor == 3)

        // Silent past its liveness (three 1 s heartbeats) with a command whose deadline is
        // further off: offline, stored as such, and the command answered then.
        let stranded = Task {
            await bed.control.command(
                .setZoom(.with { $0.factor = 4 }), deviceID: ControlBed.deviceID, nodeID: ControlBed.nodeID, timeout: .seconds(10))
        }
        _ = try await agent.serveUntilZoom()
        // Every heartbeat sent so far handled, at the time before the silence.
        try await agent.heartbeat()
        bed.time.advance(by: 3_500_000_000)
        await bed.control.expireSilentNodes()
        let offline = await stranded.value
        #expect(offline.status.code == .unavailable)
        #expect(offline.status.reason.contains("went offline before answering"), "\(offline.status.reason)")
        #expect(try await bed.store.node(ControlBed.nodeID)?.online == false)
        #expect(await bed.control.isOnline(ControlBed.nodeID) == false)
    }

    @Test func aCommandPastItsDeadline_isAnsweredOnTheInjectedClock() async throws {
        let bed = try await ControlBed()
        defer { bed.close() }
        let agent = bed.agent()
        try await agent.register(instance: "only process")
        let waiting = Task { await bed.control.command(.setZoom(.with { $0.factor = 2 }), deviceID: ControlBed.deviceID, nodeID: ControlBed.nodeID) }
        _ = try await agent.serveUntilZoom()
        // A heartbeat keeps the node online; the command's own 3 s pass.
        bed.time.advance(by: 2_000_000_000)
        try await agent.heartbeat()
        bed.time.advance(by: 1_500_000_000)
        await bed.control.expireSilentNodes()
        let answer = await waiting.value
        #expect(answer.status.code == .unavailable)
        #expect(answer.status.reason.contains("did not answer within 3.0 s"), "\(answer.status.reason)")
        #expect(await bed.control.isOnline(ControlBed.nodeID))
    }
}

/// A monotonic clock the test moves by hand.
final class ManualMonotonicClock: Sendable {
    private let value = Atomic<UInt64>(1_000_000_000)
    var now: UInt64 { value.load(ordering: .relaxed) }
    func advance(by nanoseconds: UInt64) { value.add(nanoseconds, ordering: .relaxed) }
}

/// What the control handler stands on: an in-memory store with one enrolled node, the ZAP
/// handler deciding by it, and the endpoints on free ports of 127.0.0.1.
struct ControlBed {
    static let nodeID = "node-1"
    static let deviceID = "cam-1"

    let store: FleetDatabase
    let control: ControlHandler
    let time = ManualMonotonicClock()
    let controlEndpoint: String
    let coordinatorKey: CurvePublicKey
    let nodeKeys: CurveKeyPair
    private let context = ZMQContext()
    private let closers: [@Sendable () -> Void]
    private let serving: Task<Void, Never>

    init() async throws {
        let logger = Logger(label: "capfleet.test.control")
        let store = try FleetDatabase.inMemory()
        self.store = store
        let keys = try CurveKeyPair.generate()
        coordinatorKey = keys.publicKey
        let token = try CurveKeyPair.generate()
        nodeKeys = try CurveKeyPair.generate()
        let now = Date().unixMilliseconds
        let audit = AuditEntry(at: now, actor: "test", action: "token.create", target: "rig", outcome: "ok")
        try await store.createEnrollmentToken(
            EnrollmentTokenRecord(
                publicKey: token.publicKey.z85, name: "rig", createdBy: "test",
                createdAt: now, expiresAt: now + 600_000), audit: audit)
        _ = try await store.enroll(tokenKey: token.publicKey.z85, nodeKey: nodeKeys.publicKey.z85, nodeID: Self.nodeID, at: now) { _, _ in
            AuditEntry(at: now, actor: "test", action: "node.enroll", target: Self.nodeID, outcome: "ok")
        }

        let rejections = RejectionCounter(logger: logger)
        let gate = try await AccessGate(store: store, rejections: rejections, logger: logger)
        let zap = try ZAPHandler(context: context) { gate.decide($0) }
        let security = { (domain: AccessGate.Domain) in CurveServerSecurity(keys: keys, domain: domain.rawValue) { _, _ in } }
        let configuration = CoordinatorConfiguration(dataDirectory: FileManager.default.temporaryDirectory.path, bindHost: "127.0.0.1")
        let telemetry = try TelemetryPublisherSocket(context: context, bind: "tcp://127.0.0.1:*", security: security(.telemetry))
        let events = FleetEvents(telemetry: telemetry)
        let ingest = try FrameIngest(context: context, bind: "tcp://127.0.0.1:*", rejections: rejections, security: security(.ingest))
        let alerts = AlertCenter(
            configuration: configuration.alerts, events: events, metrics: FleetMetrics(), coordinatorID: "coord-test", logger: logger)
        let time = self.time
        let arrivals = ArrivalLedger(now: { time.now })
        let endpoint = try RouterEndpoint(
            name: "control", context: context, bind: "tcp://127.0.0.1:*", maxMessageBytes: 1 << 20,
            security: security(.control), onReceive: { arrivals.note($0) })
        controlEndpoint = endpoint.boundEndpoint
        let fleetTime = FleetTimeSource()
        let control = ControlHandler(
            configuration: configuration, store: store, endpoint: endpoint, arrivals: arrivals, ingest: ingest,
            events: events, alerts: alerts, rejections: rejections, gate: gate, coordinatorID: "coord-test",
            fleetTime: fleetTime,
            clock: CoordinatorClock(
                fleetNow: { fleetTime.now() }, unixMilliseconds: { Date().unixMilliseconds },
                monotonicNow: { time.now }),
            nodeEvents: NodeEventFeed(), recordPort: 0, logger: logger)
        self.control = control
        serving = Task { await control.serve() }
        closers = [{ endpoint.stop() }, { ingest.stop() }, { alerts.stop() }, { telemetry.stop() }, { zap.stop() }]
    }

    func close() {
        serving.cancel()
        for close in closers { close() }
    }

    func agent() -> AgentOnItsThread {
        AgentOnItsThread(
            HandWrittenAgent(
                endpoint: controlEndpoint, coordinatorKey: coordinatorKey, keys: nodeKeys,
                nodeID: Self.nodeID, deviceID: Self.deviceID))
    }
}

/// The hand-written agent's blocking calls, each on an owned thread: the cooperative pool
/// that runs the control handler never waits on the agent's socket.
struct AgentOnItsThread {
    let agent: HandWrittenAgent

    init(_ agent: HandWrittenAgent) { self.agent = agent }

    func register(instance: String) async throws {
        try await OwnedThread.run("cf-test-agent") { [agent] in try agent.register(instance: instance) }
    }

    func serveUntilZoom() async throws -> Capfleet_V1_Command {
        let zoom = try await OwnedThread.run("cf-test-agent") { [agent] in try agent.serveUntilZoom() }
        guard let zoom else { throw HandWrittenAgentError("no zoom command reached the agent") }
        return zoom
    }

    func answer(_ command: Capfleet_V1_Command, zoom: Double) async throws {
        try await OwnedThread.run("cf-test-agent") { [agent] in try agent.answer(command, zoom: zoom) }
    }

    func heartbeat() async throws {
        try await OwnedThread.run("cf-test-agent") { [agent] in try agent.heartbeat() }
    }
}
