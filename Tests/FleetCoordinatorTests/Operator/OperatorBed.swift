import FleetBus
import FleetCore
import FleetProtocol
import Foundation
import Logging
import Synchronization

@testable import FleetCoordinator
@testable import FleetStore

/// The operator door's handlers on a real in-memory fleet database, with real ingest and
/// telemetry sockets on 127.0.0.1, the real lease keeper, take director and still director;
/// the agents are played by the test (`PlayedFleet`). Node `node-a` has `cam-1` (two formats,
/// zoom to 4x) and `cam-2`; the operators are ana (admin), otto (operator) and vic (viewer).
struct OperatorBed {
    static let now: UnixMilliseconds = 1_800_000_000_000
    static let fleetStart: UInt64 = 1_800_000_000_000_000_000
    /// The coordinator's machine, for exposure audits: fleet time = its CLOCK_MONOTONIC + this.
    static let bootID = "5b1f3c2e-9a0d-4e6f-8b7a-0c1d2e3f4a5b"
    static let fleetEpochOffset: UInt64 = 1_700_000_000_000_000_000

    let store: FleetDatabase
    let agents: PlayedFleet
    let events: FleetEvents
    let ingest: FrameIngest
    let liveFlow: LiveFlowKeeper
    let leases: LeaseKeeper
    let takes: TakeDirector
    let stills: StillDirector
    /// Moments by rule, fed by hand in tests (`triggers.follow`).
    let triggers: MomentTriggers
    let rejections: RejectionCounter
    let clock: CoordinatorClock
    let handlers: OperatorHandlers
    let directory: String
    let keys: CurveKeyPair
    let ports: Capfleet_V1_CoordinatorEndpoints
    private let context = ZMQContext()
    private let closers: [@Sendable () -> Void]

    init(online: Bool = true, httpPort: UInt32 = 8080) async throws {
        let logger = Logger(label: "capfleet.test.operator")
        store = try FleetDatabase.inMemory()
        directory = NSTemporaryDirectory() + "capfleet-operator-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let small = VideoFormat(pixelFormat: .yuyv, width: 64, height: 48, frameRateRanges: [.init(min: 1, max: 30)], maxZoomFactor: 4)
        let large = VideoFormat(pixelFormat: .mjpeg, width: 128, height: 96, frameRateRanges: [.init(min: 5, max: 15)])
        _ = try await store.registerNode(
            NodeRegistration(
                nodeID: "node-a", name: "alpha", hostname: "a", softwareVersion: "test", address: "127.0.0.1",
                devices: ["cam-1", "cam-2"].map {
                    .init(
                        description: DeviceDescription(deviceID: $0, name: $0, driver: "test", kind: .synthetic, formats: [small, large]),
                        activeFormatIndex: 0, activeFrameRate: 30)
                }), at: 1)
        for (name, role) in [("ana", OperatorRole.admin), ("otto", .operator), ("vic", .viewer)] {
            let key = try CurveKeyPair.generate().publicKey.z85
            try await store.saveOperator(
                OperatorRecord(name: name, publicKey: key, role: role.rawValue, addedAt: 1, addedBy: "test"),
                audit: AuditEntry(at: 1, actor: "test", action: "operator.add", target: name, outcome: "ok"))
        }
        agents = PlayedFleet(online: online ? ["node-a"] : [])
        keys = try CurveKeyPair.generate()
        let security = { [keys] (domain: String) in CurveServerSecurity(keys: keys, domain: domain) { _, _ in } }
        let telemetry = try TelemetryPublisherSocket(context: context, bind: "tcp://127.0.0.1:*", security: security("telemetry"))
        events = FleetEvents(telemetry: telemetry)
        rejections = RejectionCounter(logger: logger)
        ingest = try FrameIngest(context: context, bind: "tcp://127.0.0.1:*", rejections: rejections, security: security("ingest"))
        liveFlow = LiveFlowKeeper(events: events, logger: logger) { _, _ in }
        let fleetNow = Atomic<UInt64>(Self.fleetStart)
        clock = CoordinatorClock(fleetNow: { fleetNow.add(1_000_000, ordering: .relaxed).newValue }, unixMilliseconds: { Self.now })
        leases = LeaseKeeper(store: store, events: events, clock: clock, logger: logger)
        try await leases.load()
        var configuration = CoordinatorConfiguration(dataDirectory: directory)
        configuration.recordReserveBytes = 0
        let counter = Atomic<Int>(0)
        // No agent's recordings link attaches here: what is sent to one is refused as unreachable.
        let links = AgentRecordLinks(desk: AgentRecordingsDesk(), send: { _, _ in })
        takes = TakeDirector(
            store: store, agents: agents, writers: TakeWriters(), events: events, clock: clock,
            configuration: configuration, logger: logger, links: links,
            currentPixelFormat: { _ in "YUYV" },
            makeTakeID: { "take-\(counter.add(1, ordering: .relaxed).newValue)" })
        let collector = SegmentCollector(logger: logger)
        let agents = self.agents
        let storageSecrets = StorageSecrets(directory: directory + "/keys/storage")
        let collections = TakeCollections(
            store: store, collector: collector, copies: DestinationCopies(store: store, secrets: storageSecrets), links: links, events: events,
            clock: clock, logger: logger, isOnline: { await agents.isOnline($0) })
        stills = StillDirector(
            store: store, control: agents, collector: collector, links: links, clock: clock, events: events,
            directory: directory + "/stills", logger: logger)
        ports = .with {
            $0.operatorPort = 7001
            $0.httpPort = httpPort
        }
        let listing = DeviceListing(store: store, agents: agents, leases: leases, liveFlow: liveFlow, clock: clock)
        let offloads = TakeOffloads(
            store: store, links: links, secrets: storageSecrets, events: events, metrics: FleetMetrics(), clock: clock, logger: logger,
            isOnline: { await agents.isOnline($0) })
        let catalog = TakeCatalog(store: store, agents: agents, collections: collections, offloads: offloads, sync: takes.sync)
        let taker = MomentTaker(store: store, takes: takes, stills: stills, clock: clock)
        triggers = MomentTriggers(taker: taker, store: store, logger: logger)
        handlers = OperatorHandlers(
            listings: FleetListingHandler(
                store: store, listing: listing, statistics: FixedStatistics(), events: events, rejections: rejections, ports: ports,
                logger: logger),
            frames: FrameHandler(ingest: ingest, liveFlow: liveFlow, clock: clock),
            devices: DeviceHandler(
                store: store, agents: agents, leases: leases, listing: listing, takes: takes, clock: clock,
                alignmentGridOrigin: 1_700_000_000_000_000_000,
                exposureTruth: ExposureAudit.Truth(bootID: Self.bootID, fleetEpochOffset: Self.fleetEpochOffset)),
            takes: TakeHandler(store: store, takes: takes, catalog: catalog, collections: collections, offloads: offloads, clock: clock),
            recordingFiles: RecordingFilesHandler(
                store: store, agents: agents, agentLinks: links, copies: DestinationCopies(store: store, secrets: storageSecrets), events: events,
                clock: clock, logger: logger),
            stills: StillHandler(store: store, stills: stills, clock: clock),
            moments: MomentHandler(taker: taker, store: store, catalog: catalog),
            momentRules: MomentRuleHandler(store: store, triggers: triggers, clock: clock),
            storage: StorageHandler(store: store, secrets: storageSecrets, clock: clock),
            access: AccessHandler(store: store, leases: leases, coordinatorKey: keys.publicKey, clock: clock, logger: logger),
            nodeAccess: NodeAccessHandler(
                store: store, agents: agents, ingest: ingest, liveFlow: liveFlow, events: events, clock: clock, logger: logger),
            dashboardAccess: DashboardAccessHandler(store: store, ports: ports, clock: clock),
            consent: ConsentHandler(store: store, agents: agents, takes: takes, events: events, clock: clock, logger: logger),
            backup: BackupHandler(
                store: store, backups: DatabaseBackups(dataDirectory: directory, store: store, clock: clock), clock: clock, logger: logger))
        let ingest = self.ingest
        closers = [{ ingest.stop() }, { telemetry.stop() }]
    }

    func close() async {
        await takes.shutdown()
        for close in closers { close() }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The audit log's entries for `action`, oldest first.
    func audit(_ action: String) async throws -> [AuditEntry] {
        try await store.auditLog(actionPrefix: action).filter { $0.action == action }.sorted { ($0.id ?? 0) < ($1.id ?? 0) }
    }

    /// `who` takes the configuration lease on `deviceID`, as every change of a device needs.
    func lock(_ deviceID: String, by who: String) async throws {
        var reply = Capfleet_V1_OperatorReply()
        try await handlers.devices.lock(
            .with {
                $0.deviceID = deviceID
                $0.seconds = 600
            }, by: who, session: nil, into: &reply)
        guard reply.status.code == .ok else { throw BedError("\(who) could not lock \(deviceID): \(reply.status.reason)") }
    }

    func account(_ name: String) async throws -> OperatorRecord {
        guard let record = try await store.operatorRecord(named: name) else { throw BedError("no operator \(name) in the bed") }
        return record
    }
}

struct BedError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The fleet's statistics as a reporter would have them: one device's.
struct FixedStatistics: FleetStatistics {
    var deviceStatuses: [Capfleet_V1_DeviceStatus] { [.with { $0.deviceID = "cam-1" }] }
    var nodeStatuses: [Capfleet_V1_NodeStatus] { [.with { $0.nodeID = "node-a" }] }
    var pressureReports: [Capfleet_V1_PressureReport] { [] }
}

/// The agents, as the test plays them: the nodes online that the test says, answering every
/// command OK (or refusing it for a device) as a device running its first format at 30 fps
/// would, and remembering what they were told, revoked and asked to remove.
actor PlayedFleet: FleetAgents {
    private(set) var commands: [(deviceID: String, action: Capfleet_V1_Command.OneOf_Action)] = []
    private(set) var revocations: [(nodeID: String, reason: String)] = []
    private(set) var removals: [(nodeID: String, removed: Bool)] = []
    private var online: Set<String>
    private var refusals: [String: String] = [:]
    private var exposureAudits: [String: Capfleet_V1_ExposureAuditSamples] = [:]

    init(online: Set<String>) { self.online = online }

    /// What `deviceID` answers an exposure audit with.
    func audits(_ deviceID: String, reading samples: Capfleet_V1_ExposureAuditSamples) { exposureAudits[deviceID] = samples }

    func setOnline(_ nodeID: String, _ isOnline: Bool) {
        if isOnline { online.insert(nodeID) } else { online.remove(nodeID) }
    }

    func refuse(_ deviceID: String, reason: String?) { refusals[deviceID] = reason }

    func isOnline(_ nodeID: String) -> Bool { online.contains(nodeID) }

    func command(_ action: Capfleet_V1_Command.OneOf_Action, deviceID: String, nodeID: String, timeout: Duration) -> Capfleet_V1_CommandReply {
        commands.append((deviceID, action))
        guard online.contains(nodeID) else {
            return .with { $0.status = .failure(.unavailable, "node \(nodeID) is offline; the command was not sent") }
        }
        if let reason = refusals[deviceID] { return .with { $0.status = .failure(.unsupported, reason) } }
        return .with {
            $0.status = .ok
            $0.activeFormatIndex = 0
            $0.activeFrameRate = 30
            switch action {
            case let .setActiveFormat(format): $0.activeFormatIndex = format.formatIndex
            case let .setFrameRate(rate):
                $0.activeFrameRate = rate.framesPerSecond
                $0.activeMinFrameRate = rate.minFramesPerSecond
            case let .setZoom(zoom): $0.zoomFactor = zoom.factor
            case let .setConsent(consent): $0.consent = consent.state
            case .auditExposures: if let samples = exposureAudits[deviceID] { $0.exposureAudit = samples }
            case let .setControl(request):
                // A driver that takes the value but lands on its step below, as some do.
                $0.control = .with {
                    $0.id = request.controlID
                    $0.hasValue_p = true
                    $0.value = request.value - request.value % 2
                }
            case let .setPreRoll(request):
                // Applied, with a second kept so far.
                $0.preRoll = .with {
                    ($0.milliseconds, $0.budgetBytes) = (request.milliseconds, request.budgetBytes)
                    $0.keptNs = request.milliseconds > 0 ? 1_000_000_000 : 0
                }
            case let .setRegion(request):
                // A 640x480 window whose corner moves in steps of 4, as a camera's OffsetX may.
                $0.region = .with {
                    ($0.width, $0.height) = (640, 480)
                    ($0.left, $0.top) = request.centred ? (704, 784) : (request.left - request.left % 4, request.top - request.top % 4)
                }
            default: break
            }
        }
    }

    func liveStatus(of nodeIDs: Set<String>) -> [String: Capfleet_V1_AgentStatus] {
        var statuses: [String: Capfleet_V1_AgentStatus] = [:]
        for nodeID in nodeIDs.intersection(online) { statuses[nodeID] = .with { $0.nodeID = nodeID } }
        return statuses
    }

    func beginRemoval(_ nodeID: String) -> Bool { !online.contains(nodeID) }

    func endRemoval(_ nodeID: String, removed: Bool) { removals.append((nodeID, removed)) }

    func revoked(nodeID: String, keys: [String], reason: String) { revocations.append((nodeID, reason)) }

    /// The actions sent to `deviceID`, in order.
    func sent(to deviceID: String) -> [Capfleet_V1_Command.OneOf_Action] { commands.filter { $0.deviceID == deviceID }.map(\.action) }
}
