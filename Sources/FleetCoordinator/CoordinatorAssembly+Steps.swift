import FleetBus
import FleetCore
import FleetHTTP
import FleetProtocol
import FleetStore
import FleetSystem
import Foundation
import Logging

/// The steps of opening the coordinator, each what the next stands on: the base (data,
/// clock, store, keys), the sockets, the fleet's parts, the operators' door.
extension CoordinatorAssembly {
    /// What everything else stands on: the data directory (held), one fleet time and one clock
    /// every part reads, the store as a crash left it made whole, the identity and keys.
    struct Base {
        let directoryLock: DataDirectoryLock
        let fleetTime: FleetTimeSource
        let clock: CoordinatorClock
        let store: FleetDatabase
        let coordinatorID: String
        let keys: CurveKeyPair

        static func open(_ configuration: CoordinatorConfiguration, logger: Logger) async throws -> Base {
            try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true)
            let directoryLock = try DataDirectoryLock.acquire(dataDirectory: configuration.dataDirectory)
            let fleetTime = FleetTimeSource()
            let clock = CoordinatorClock.system(fleetTime)
            let store = try FleetDatabase(path: configuration.databasePath)
            try await store.markAllNodesOffline(at: clock.unixMilliseconds())
            // Segments a crash left open are made to play again before anything records anew.
            for report in try await SegmentRecovery.recoverOpenSegments(in: store, clock: clock.unixMilliseconds) {
                logger.notice("recording segment left open by a crash", metadata: ["path": "\(report.path)", "outcome": "\(report.note)"])
            }
            return Base(
                directoryLock: directoryLock, fleetTime: fleetTime, clock: clock, store: store,
                coordinatorID: try CoordinatorAssembly.coordinatorID(in: configuration.dataDirectory),
                keys: try CoordinatorKeys.loadOrCreate(dataDirectory: configuration.dataDirectory))
        }
    }

    /// The ZeroMQ endpoints, behind the ZAP handler bound before any of them (libzmq lets
    /// everyone in while none is bound), with what they hand their input to.
    struct Sockets {
        let rejections: RejectionCounter
        let gate: AccessGate
        let zap: ZAPHandler
        let telemetry: TelemetryPublisherSocket
        let events: FleetEvents
        let metrics: FleetMetrics
        let ingest: FrameIngest
        let clock: ClockEndpoint
        let control: RouterEndpoint
        let arrivals: ArrivalLedger
        let operators: RouterEndpoint
        let record: RecordEndpoint
        /// What the agents' recordings links say, filled by the record endpoint.
        let agentTakes: AgentRecordingsDesk
        let writers: TakeWriters
        let collector: SegmentCollector

        static func bind(_ configuration: CoordinatorConfiguration, base: Base, logger: Logger) async throws -> Sockets {
            // Decrypting frames must never hold up a heartbeat: frames and control on separate I/O threads.
            let context = ZMQContext.withSeparateLanes()
            let rejections = RejectionCounter(logger: logger)
            // Counts of refused input go on from the last run's, like the frame counters.
            rejections.resume(from: try await base.store.rejectionTotals())
            let gate = try await AccessGate(store: base.store, rejections: rejections, logger: logger)
            let zap = try ZAPHandler(context: context) { gate.decide($0) }
            let security = { (domain: AccessGate.Domain) in
                CurveServerSecurity(keys: base.keys, domain: domain.rawValue) { domain, event in gate.handshakeFailed(domain: domain, event: event) }
            }
            let wallClock = WallClock(unixMilliseconds: base.clock.unixMilliseconds)
            let endpoint = configuration.endpoint
            let telemetry = try CoordinatorAssembly.bind("telemetry", configuration.telemetryPort) {
                try TelemetryPublisherSocket(context: context, bind: endpoint(configuration.telemetryPort), security: security(.telemetry))
            }
            let metrics = FleetMetrics()
            let ingest = try CoordinatorAssembly.bind("frame ingest", configuration.frameIngestPort) {
                try FrameIngest(
                    context: context, bind: endpoint(configuration.frameIngestPort), rejections: rejections, security: security(.ingest),
                    live: (endpoint(configuration.livePort), security(.live)),
                    admits: { userID, nodeID, fd, peer in gate.admitsFrame(userID: userID, nodeID: nodeID, fd: fd, peer: peer) },
                    wallClock: wallClock)
            }
            let clock = try CoordinatorAssembly.bind("clock", configuration.clockPort) {
                try ClockEndpoint(
                    context: context, bind: endpoint(configuration.clockPort), security: security(.clock), fleetTime: base.fleetTime,
                    coordinatorID: base.coordinatorID, probeBudget: configuration.clockProbeBudget, rejections: rejections)
            }
            let arrivals = ArrivalLedger(now: base.clock.monotonicNow)
            let control = try CoordinatorAssembly.bind("control", configuration.controlPort) {
                try RouterEndpoint(
                    name: "control", context: context, bind: endpoint(configuration.controlPort), maxMessageBytes: 16 * 1024 * 1024,
                    security: security(.control), onReceive: { arrivals.note($0) })
            }
            let operators = try CoordinatorAssembly.bind("operator", configuration.operatorPort) {
                try RouterEndpoint(
                    name: "operator", context: context, bind: endpoint(configuration.operatorPort), maxMessageBytes: 1024 * 1024,
                    security: security(.operator))
            }
            let agentTakes = AgentRecordingsDesk()
            let writers = TakeWriters()
            let collector = SegmentCollector(logger: logger)
            let record = try CoordinatorAssembly.bind("recording", configuration.recordPort) {
                try RecordEndpoint(
                    context: context, bind: endpoint(configuration.recordPort), security: security(.record), rejections: rejections,
                    gate: gate, writers: writers, agentTakes: agentTakes, collector: collector,
                    outlet: try RecordedFrameOutlet(context: context, endpoint: ingest.recordedEndpoint))
            }
            return Sockets(
                rejections: rejections, gate: gate, zap: zap, telemetry: telemetry,
                events: FleetEvents(telemetry: telemetry, metrics: metrics, wallClock: wallClock), metrics: metrics, ingest: ingest,
                clock: clock, control: control, arrivals: arrivals, operators: operators, record: record, agentTakes: agentTakes,
                writers: writers, collector: collector)
        }
    }

    /// The fleet's parts: the control dialog, whose node events the takes, live flow and
    /// detections read (each through its own subscription, taken here before anything is
    /// published), the stills, leases, alerts and what reports on them.
    struct Fleet {
        let alerts: AlertCenter
        let control: ControlHandler
        let nodeEvents:
            (
                liveFlow: NodeEventFeed.Subscription, takes: NodeEventFeed.Subscription, detections: NodeEventFeed.Subscription,
                sensorData: NodeEventFeed.Subscription, moments: NodeEventFeed.Subscription
            )
        let liveFlow: LiveFlowKeeper
        let links: AgentRecordLinks
        let takes: TakeDirector
        let detections: DetectionRelay
        let sensorData: SensorDataRelay
        let collections: TakeCollections
        /// The storage destinations' secrets (DATA/keys/storage).
        let storageSecrets: StorageSecrets
        /// Takes copied to storage destinations by the hosts that hold them.
        let offloads: TakeOffloads
        let stills: StillDirector
        /// Moments taken by rules, from the reports and samples above.
        let moments: MomentTakerAndTriggers
        let leases: LeaseKeeper
        let housekeeper: RecordingHousekeeper
        let reporter: TelemetryReporter
        let rejectionReporter: RejectionReporter

        static func open(_ configuration: CoordinatorConfiguration, base: Base, sockets: Sockets, logger: Logger) async throws -> Fleet {
            let (store, clock, events) = (base.store, base.clock, sockets.events)
            let alerts = AlertCenter(
                configuration: configuration.alerts, events: events, metrics: sockets.metrics, coordinatorID: base.coordinatorID,
                logger: logger)
            let feed = NodeEventFeed()
            let nodeEvents = (
                liveFlow: feed.subscribe(), takes: feed.subscribe(), detections: feed.subscribe(), sensorData: feed.subscribe(),
                moments: feed.subscribe()
            )
            let control = ControlHandler(
                configuration: configuration, store: store, endpoint: sockets.control, arrivals: sockets.arrivals, ingest: sockets.ingest,
                events: events, alerts: alerts, rejections: sockets.rejections, gate: sockets.gate, coordinatorID: base.coordinatorID,
                fleetTime: base.fleetTime, clock: clock, nodeEvents: feed, recordPort: sockets.record.boundPort, logger: logger)
            let liveFlow = LiveFlowKeeper(events: events, logger: logger) { nodeID, message in await control.tell(nodeID, message) }
            let record = sockets.record
            let links = AgentRecordLinks(desk: sockets.agentTakes) { routing, message in record.send(to: routing, message) }
            let ingest = sockets.ingest
            let takes = TakeDirector(
                store: store, agents: control, writers: sockets.writers, events: events, clock: clock, configuration: configuration,
                logger: logger, links: links, currentPixelFormat: { ingest.state(of: $0)?.layout.pixelFormat })
            let stills = StillDirector(
                store: store, control: control, collector: sockets.collector, links: links, clock: clock, events: events,
                directory: configuration.takesDirectory + "/stills", logger: logger)
            let storageSecrets = StorageSecrets(directory: CoordinatorKeys.directory(dataDirectory: configuration.dataDirectory) + "/storage")
            let offloads = TakeOffloads(
                store: store, links: links, secrets: storageSecrets, events: events, metrics: sockets.metrics, clock: clock, logger: logger,
                isOnline: { nodeID in await control.isOnline(nodeID) })
            // Before the takes resume: one stored meanwhile is offloaded by the policy too.
            await takes.whenStored { takeID in await offloads.takeStored(takeID) }
            try await takes.resumeUnfinished()
            try await stills.endUnanswered()
            // Agents' recordings reach the takes only now that the parts in progress are set up.
            record.start()
            let leases = LeaseKeeper(store: store, events: events, clock: clock, logger: logger)
            try await leases.load()
            let taker = MomentTaker(store: store, takes: takes, stills: stills, clock: clock)
            let triggers = MomentTriggers(taker: taker, store: store, logger: logger)
            try await triggers.load()
            return Fleet(
                alerts: alerts, control: control, nodeEvents: nodeEvents, liveFlow: liveFlow, links: links, takes: takes,
                detections: DetectionRelay(telemetry: sockets.telemetry, takes: takes, logger: logger),
                sensorData: SensorDataRelay(telemetry: sockets.telemetry, takes: takes, logger: logger),
                collections: TakeCollections(
                    store: store, collector: sockets.collector, copies: DestinationCopies(store: store, secrets: storageSecrets), links: links,
                    events: events, clock: clock, logger: logger, isOnline: { nodeID in await control.isOnline(nodeID) }),
                storageSecrets: storageSecrets, offloads: offloads, stills: stills, moments: MomentTakerAndTriggers(taker: taker, triggers: triggers),
                leases: leases,
                housekeeper: RecordingHousekeeper(
                    store: store, events: events, metrics: sockets.metrics, configuration: configuration, clock: clock, logger: logger),
                reporter: TelemetryReporter(
                    store: store, ingest: ingest, control: control, liveFlow: liveFlow, telemetry: sockets.telemetry,
                    metrics: sockets.metrics, rejections: sockets.rejections, clockProbes: sockets.clock.statistics, alerts: alerts,
                    clock: clock, logger: logger),
                rejectionReporter: RejectionReporter(store: store, events: events, clock: clock, logger: logger))
        }
    }

    /// The operators' ways in: the HTTP port is held first, so the operator door (whose
    /// `who_am_i` tells every port) is made before the dashboard that serves it on that port.
    struct Door {
        let operators: OperatorRouter
        let liveFeed: DashboardLiveFeed
        let liveViews: LiveViewRenderer
        let http: WebServer?

        static func open(_ configuration: CoordinatorConfiguration, base: Base, sockets: Sockets, fleet: Fleet, logger: Logger) async throws -> Door {
            let httpPort = try reserveHTTP(configuration)
            func port(_ endpoint: String) -> UInt32 { endpoint.split(separator: ":").last.flatMap { UInt32($0) } ?? 0 }
            let ports = Capfleet_V1_CoordinatorEndpoints.with {
                $0.controlPort = port(sockets.control.boundEndpoint)
                $0.frameIngestPort = port(sockets.ingest.boundEndpoint)
                $0.operatorPort = port(sockets.operators.boundEndpoint)
                $0.telemetryPort = port(sockets.telemetry.boundEndpoint)
                $0.metricsPort = httpPort.map { UInt32($0.port) } ?? 0
                $0.httpPort = httpPort.map { UInt32($0.port) } ?? 0
                $0.httpTls = httpPort != nil && configuration.httpTLS != nil
                $0.clockPort = port(sockets.clock.boundEndpoint)
                $0.recordPort = UInt32(sockets.record.boundPort)
                $0.livePort = sockets.ingest.liveEndpoint.map(port) ?? 0
            }
            let operators = operatorRouter(
                store: base.store, endpoint: sockets.operators, ports: ports, sockets: sockets, fleet: fleet,
                coordinatorKey: base.keys.publicKey, alignmentGridOrigin: base.fleetTime.alignmentGridOrigin,
                exposureTruth: exposureTruth(base.fleetTime, logger: logger), clock: base.clock,
                backups: DatabaseBackups(dataDirectory: configuration.dataDirectory, store: base.store, clock: base.clock),
                storageSecrets: fleet.storageSecrets,
                logger: logger)
            let liveFeed = DashboardLiveFeed(read: { try await operators.dashboardFleet() }, events: sockets.events, logger: logger)
            let liveViews = LiveViewRenderer(logger: logger)
            let dashboard = DashboardRoutes(
                store: base.store, operators: operators, feed: liveFeed, renderer: liveViews, clock: base.clock,
                rejections: sockets.rejections, secureCookies: configuration.httpTLS != nil, logger: logger)
            let http: WebServer? =
                if let httpPort {
                    try await serveHTTP(sockets.metrics, dashboard: dashboard, configuration: configuration, on: httpPort, logger: logger)
                } else {
                    nil
                }
            return Door(operators: operators, liveFeed: liveFeed, liveViews: liveViews, http: http)
        }
    }
}

extension CoordinatorAssembly {
    /// What exposure audits compare timecodes with: fleet time is this machine's
    /// CLOCK_MONOTONIC plus the epoch offset, so a synthetic scene filmed on this machine (its
    /// boot id) shows fleet time exactly. Without a boot id only a display's fleet timecode
    /// can be audited, which the audit then says.
    static func exposureTruth(_ fleetTime: FleetTimeSource, logger: Logger) -> ExposureAudit.Truth {
        do {
            return ExposureAudit.Truth(bootID: try HostBootID.read(), fleetEpochOffset: fleetTime.epochOffset)
        } catch {
            logger.warning(
                "cannot read this machine's boot id: exposure audits of synthetic scenes will say their clock is another machine's",
                metadata: ["error": "\(error)"])
            return ExposureAudit.Truth(bootID: "", fleetEpochOffset: fleetTime.epochOffset)
        }
    }
}
