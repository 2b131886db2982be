import FleetBus
import FleetCore
import FleetDaemon
import FleetHTTP
import FleetHost
import FleetProtocol
import FleetRecording
import FleetStore
import Foundation
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// The coordinator put together: its store, keys and endpoints opened in the order they
/// depend on one another, and its long-lived parts as services in one list.
///
/// The list is the shutdown order read backwards (the group stops its last part first and
/// waits for each): a part stands after everything it uses, so it stops before them.
/// What that keeps:
/// - the beats stop first, then the operator and control endpoints (nothing new is asked of
///   the takes or the agents);
/// - the takes finish their open segments while the record endpoint still delivers frames;
/// - ingest has stopped counting before the final counters are stored, and they are stored
///   while the telemetry endpoint is still open;
/// - the ZAP handler stops last: with every endpoint closed, nothing can slip in while no
///   handler is bound.
struct CoordinatorAssembly: Sendable {
    let parts: [any Service]
    let endpoints: CoordinatorEndpoints
    /// Held for as long as the parts run: a second coordinator on the same data is refused.
    let directoryLock: DataDirectoryLock

    /// - Parameter beatClock: the clock the periodic parts tick on.
    static func open(configuration: CoordinatorConfiguration, logger: Logger, beatClock: any Clock<Duration>) async throws -> CoordinatorAssembly {
        try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true)
        let directoryLock = try DataDirectoryLock.acquire(dataDirectory: configuration.dataDirectory)
        // One fleet time for the clock endpoint and everything that reads it, and one clock
        // every part reads.
        let fleetTime = FleetTimeSource()
        let coordinatorClock = CoordinatorClock.system(fleetTime)
        let store = try FleetDatabase(path: configuration.databasePath)
        try await store.markAllNodesOffline(at: coordinatorClock.unixMilliseconds())
        // Segments a crash left open are made to play again before anything records anew.
        for report in try await SegmentRecovery.recoverOpenSegments(in: store, clock: coordinatorClock.unixMilliseconds) {
            logger.notice("recording segment left open by a crash", metadata: ["path": "\(report.path)", "outcome": "\(report.note)"])
        }
        let coordinatorID = try coordinatorID(in: configuration.dataDirectory)
        let keys = try CoordinatorKeys.loadOrCreate(dataDirectory: configuration.dataDirectory)

        // Decrypting frames must never hold up a heartbeat: frames and control on separate I/O threads.
        let context = ZMQContext.withSeparateLanes()
        let metrics = FleetMetrics()
        let eventsBox = EventsBox()
        let rejections = RejectionCounter(logger: logger) { endpoint, reason, peer, detail in
            eventsBox.events?.emit(
                reason.isAccessDenial ? .accessDenied : .inputRejected,
                message: "\(endpoint): \(reason.rawValue) from \(peer)" + (detail.isEmpty ? "" : ": \(detail)"))
            guard reason.isAccessDenial, reason != .forbidden else { return }
            // Logged (and so audited) at most once a minute per endpoint, reason and peer.
            Task {
                do {
                    try await store.appendAudit(
                        AuditEntry(
                            at: coordinatorClock.unixMilliseconds(), actor: "peer:\(peer)", action: "access.denied",
                            target: endpoint, outcome: "refused", detail: "\(reason.rawValue): \(detail)"))
                } catch {
                    // The refusal itself stands; only its audit entry is missing, which an admin must hear of.
                    logger.error(
                        "could not audit a refused connection",
                        metadata: [
                            "endpoint": "\(endpoint)", "peer": "\(peer)", "reason": "\(reason.rawValue)", "error": "\(error)",
                        ])
                }
            }
        }
        // Counts of refused input go on from the last run's, like the frame counters.
        rejections.resume(from: try await store.rejectionTotals())
        let gate = try await AccessGate(store: store, rejections: rejections, logger: logger)
        // Bound before any endpoint: libzmq lets everyone in while no ZAP handler is bound.
        let zap = try ZAPHandler(context: context) { gate.decide($0) }
        let security = { (domain: AccessGate.Domain) in
            CurveServerSecurity(keys: keys, domain: domain.rawValue) { domain, event in gate.handshakeFailed(domain: domain, event: event) }
        }
        let telemetry = try bind("telemetry", configuration.telemetryPort) {
            try TelemetryPublisherSocket(context: context, bind: configuration.endpoint(configuration.telemetryPort), security: security(.telemetry))
        }
        let events = FleetEvents(telemetry: telemetry, metrics: metrics, wallClock: WallClock(unixMilliseconds: coordinatorClock.unixMilliseconds))
        eventsBox.events = events
        let ingest = try bind("frame ingest", configuration.frameIngestPort) {
            try FrameIngest(
                context: context, bind: configuration.endpoint(configuration.frameIngestPort), rejections: rejections,
                security: security(.ingest),
                live: (configuration.endpoint(configuration.livePort), security(.live)),
                admits: { userID, nodeID, fd, peer in gate.admitsFrame(userID: userID, nodeID: nodeID, fd: fd, peer: peer) },
                wallClock: WallClock(unixMilliseconds: coordinatorClock.unixMilliseconds))
        }
        let clock = try bind("clock", configuration.clockPort) {
            try ClockEndpoint(
                context: context, bind: configuration.endpoint(configuration.clockPort), security: security(.clock),
                fleetTime: fleetTime, coordinatorID: coordinatorID, probeBudget: configuration.clockProbeBudget,
                rejections: rejections)
        }
        let arrivals = ArrivalLedger(now: coordinatorClock.monotonicNow)
        let controlEndpoint = try bind("control", configuration.controlPort) {
            try RouterEndpoint(
                name: "control", context: context, bind: configuration.endpoint(configuration.controlPort),
                maxMessageBytes: 16 * 1024 * 1024, security: security(.control), onReceive: { arrivals.note($0) })
        }
        let operatorEndpoint = try bind("operator", configuration.operatorPort) {
            try RouterEndpoint(
                name: "operator", context: context, bind: configuration.endpoint(configuration.operatorPort),
                maxMessageBytes: 1024 * 1024, security: security(.operator))
        }
        let alerts = AlertCenter(
            configuration: configuration.alerts, events: events, metrics: metrics,
            coordinatorID: coordinatorID, logger: logger)
        let control = ControlHandler(
            configuration: configuration, store: store, endpoint: controlEndpoint, arrivals: arrivals, ingest: ingest,
            events: events, alerts: alerts, rejections: rejections, gate: gate, coordinatorID: coordinatorID,
            fleetTime: fleetTime, clock: coordinatorClock, logger: logger)
        let liveFlow = LiveFlowKeeper(events: events, logger: logger) { nodeID, message in await control.tell(nodeID, message) }
        await control.followLiveFlow(liveFlow)
        let writers = TakeWriters()
        // Takes recorded on the agents: their reports, collect's copies, verify's checks.
        let agentTakes = AgentRecordingsDesk()
        let collector = SegmentCollector(desk: agentTakes, logger: logger)
        let recordEndpoint = try bind("recording", configuration.recordPort) {
            try RecordEndpoint(
                context: context, bind: configuration.endpoint(configuration.recordPort), security: security(.record),
                rejections: rejections, gate: gate, writers: writers, agentTakes: agentTakes, collector: collector,
                outlet: try RecordedFrameOutlet(context: context, endpoint: ingest.recordedEndpoint))
        }
        agentTakes.sendThrough { routing, message in recordEndpoint.send(to: routing, message) }
        let collections = TakeCollections(
            store: store, collector: collector, desk: agentTakes, events: events, clock: coordinatorClock, logger: logger,
            isOnline: { nodeID in await control.isOnline(nodeID) })
        let stills = StillDirector(
            store: store, control: control, collector: collector, desk: agentTakes, clock: coordinatorClock, events: events,
            directory: configuration.takesDirectory + "/stills", logger: logger)
        let takes = TakeDirector(
            store: store, agents: control, writers: writers, events: events, clock: coordinatorClock,
            configuration: configuration, logger: logger,
            sendRecordDown: { routing, message in recordEndpoint.send(to: routing, message) },
            currentPixelFormat: { ingest.state(of: $0)?.layout.pixelFormat })
        await takes.reach(agentsThrough: agentTakes)
        await control.followDetections(DetectionRelay(telemetry: telemetry, takes: takes, logger: logger))
        try await takes.resumeUnfinished()
        try await stills.endUnanswered()
        recordEndpoint.start()
        await control.followTakes(
            recordPort: recordEndpoint.boundPort,
            registered: { nodeID in await takes.nodeRegistered(nodeID) },
            offline: { nodeID in await takes.nodeOffline(nodeID) },
            deviceEvent: { deviceID, kind, detail in await takes.deviceEvent(deviceID, kind: kind, detail: detail) })
        let housekeeper = RecordingHousekeeper(
            store: store, events: events, metrics: metrics, configuration: configuration,
            clock: coordinatorClock, logger: logger)
        let leases = LeaseKeeper(store: store, events: events, clock: coordinatorClock, logger: logger)
        try await leases.load()
        let reporter = TelemetryReporter(
            store: store, ingest: ingest, control: control, liveFlow: liveFlow, telemetry: telemetry, metrics: metrics,
            rejections: rejections, clockProbes: clock.statistics, alerts: alerts, clock: coordinatorClock, logger: logger)
        // The HTTP port's server is bound before the operator router exists (who_am_i tells
        // its port); the dashboard reaches the router once it does.
        let lateOperators = LateBound<OperatorRouter>()
        let liveFeed = DashboardLiveFeed(
            read: {
                guard let operators = lateOperators.value else { throw CoordinatorError.starting }
                return try await operators.dashboardFleet()
            }, events: events, logger: logger)
        let liveViews = LiveViewRenderer(logger: logger)
        let dashboard = DashboardRoutes(
            store: store, operators: lateOperators, feed: liveFeed, renderer: liveViews, clock: coordinatorClock,
            rejections: rejections,
            secureCookies: configuration.httpTLS != nil, logger: logger)
        let metricsServer: WebServer? =
            if let port = configuration.metricsPort {
                try await serveHTTP(metrics, dashboard: dashboard, configuration: configuration, port: port, logger: logger)
            } else {
                nil
            }
        // What `who_am_i` tells an operator of the other endpoints (a subscriber's telemetry port).
        func port(_ endpoint: String) -> UInt32 { endpoint.split(separator: ":").last.flatMap { UInt32($0) } ?? 0 }
        let ports = Capfleet_V1_CoordinatorEndpoints.with {
            $0.controlPort = port(controlEndpoint.boundEndpoint)
            $0.frameIngestPort = port(ingest.boundEndpoint)
            $0.operatorPort = port(operatorEndpoint.boundEndpoint)
            $0.telemetryPort = port(telemetry.boundEndpoint)
            $0.metricsPort = metricsServer.map { UInt32($0.port) } ?? 0
            $0.httpPort = metricsServer.map { UInt32($0.port) } ?? 0
            $0.httpTls = metricsServer != nil && configuration.httpTLS != nil
            $0.clockPort = port(clock.boundEndpoint)
            $0.recordPort = UInt32(recordEndpoint.boundPort)
            $0.livePort = ingest.liveEndpoint.map(port) ?? 0
        }
        let operators = operatorRouter(
            store: store, endpoint: operatorEndpoint, ports: ports, ingest: ingest, control: control, liveFlow: liveFlow,
            reporter: reporter, rejections: rejections, leases: leases, events: events, coordinatorKey: keys.publicKey,
            alignmentGridOrigin: fleetTime.alignmentGridOrigin, clock: coordinatorClock, takes: takes, agentTakes: agentTakes,
            collections: collections, stills: stills,
            backups: DatabaseBackups(dataDirectory: configuration.dataDirectory, store: store, clock: coordinatorClock), logger: logger)
        lateOperators.set(operators)

        // The shutdown order, read backwards: see the type's comment.
        let parts: [(any Service)?] = [
            StoppingService("ZAP handler") { zap.stop() },
            StoppingService("telemetry endpoint") { telemetry.stop() },
            StoppingService("stored counters") {
                do {
                    try await reporter.flushCounters()
                } catch {
                    logger.error("could not store the final counters", metadata: ["error": "\(error)"])
                }
            },
            StoppingService("alert delivery") { alerts.stop() },
            metricsServer.map { server in
                StoppingService("metrics endpoint") {
                    do {
                        try await server.stop()
                    } catch {
                        logger.error("the metrics endpoint ended with an error", metadata: ["error": "\(error)"])
                    }
                }
            },
            // Stopped before the HTTP server, which waits for the streams they hold open.
            StoppingService("dashboard live views") {
                await liveFeed.close()
                await liveViews.stop()
            },
            StoppingService("clock endpoint") { clock.stop() },
            // Follows the viewers until ingest closes the live endpoint.
            StoppingService("frame ingest", run: { await liveFlow.follow(ingest.liveSubscriptions) }) { ingest.stop() },
            // After the record endpoint, which hands it chunks.
            StoppingService("collector") { await collector.stop() },
            StoppingService("record endpoint") { recordEndpoint.stop() },
            StoppingService("agent-held takes", run: { await takes.follow(agentTakes.reports) }) { agentTakes.finish() },
            StoppingService("agent-held stills", run: { await stills.follow(agentTakes.stillNews) }) { agentTakes.finish() },
            // Open segments are finished so they play; the takes go on at the next start.
            StoppingService("takes") { await takes.shutdown() },
            StoppingService("control endpoint", run: { await control.serve() }) { controlEndpoint.stop() },
            // After control: an operator's request may command agents.
            StoppingService("operator endpoint", run: { await operators.serve() }) { operatorEndpoint.stop() },
            PeriodicService("node liveness", every: .milliseconds(250), clock: beatClock) {
                await control.expireSilentNodes()
                await leases.expire()
            },
            PeriodicService("telemetry reporter", every: .seconds(1), clock: beatClock) { await reporter.tick() },
            // Reads the fleet only while a browser watches.
            PeriodicService("dashboard live feed", every: .seconds(1), clock: beatClock) { await liveFeed.tick() },
            PeriodicService("live frame leases", every: .seconds(1), clock: beatClock) { await liveFlow.renew() },
            PeriodicService("recording housekeeper", every: .seconds(5), clock: beatClock, firstTick: .atStart) { await housekeeper.tick() },
            // Stopped first: says that shutdown has begun.
            StoppingService("shutdown notice") {
                logger.info("coordinator stopping")
                SystemdNotifier.stopping()
            },
        ]

        let endpoints = CoordinatorEndpoints(
            control: controlEndpoint.boundEndpoint, frameIngest: ingest.boundEndpoint,
            operator: operatorEndpoint.boundEndpoint, telemetry: telemetry.boundEndpoint,
            database: configuration.databasePath, publicKey: keys.publicKey,
            publicKeyFile: CoordinatorKeys.publicPath(dataDirectory: configuration.dataDirectory),
            metrics: metricsServer.map {
                "\(configuration.httpTLS == nil ? "http" : "https")://\(configuration.httpDisplayHost):\($0.port)/metrics"
            })
        logger.info(
            "coordinator ready",
            metadata: [
                "control": "\(endpoints.control)", "ingest": "\(endpoints.frameIngest)", "operator": "\(endpoints.operator)",
                "telemetry": "\(endpoints.telemetry)", "clock": "\(clock.boundEndpoint)", "record": "\(recordEndpoint.boundEndpoint)",
                "live": "\(ingest.liveEndpoint ?? "off")", "database": "\(endpoints.database)",
                "metrics": "\(endpoints.metrics ?? "off")",
                "public_key": "\(keys.publicKey.z85)",
            ])
        return CoordinatorAssembly(parts: parts.compactMap { $0 }, endpoints: endpoints, directoryLock: directoryLock)
    }
}

/// The operator door: its router and a handler per topic, each given only what it uses.
extension CoordinatorAssembly {
    static func operatorRouter(
        store: FleetDatabase, endpoint: RouterEndpoint, ports: Capfleet_V1_CoordinatorEndpoints, ingest: FrameIngest, control: ControlHandler,
        liveFlow: LiveFlowKeeper, reporter: TelemetryReporter, rejections: RejectionCounter, leases: LeaseKeeper, events: FleetEvents,
        coordinatorKey: CurvePublicKey, alignmentGridOrigin: UInt64, clock: CoordinatorClock, takes: TakeDirector,
        agentTakes: AgentRecordingsDesk, collections: TakeCollections, stills: StillDirector, backups: DatabaseBackups, logger: Logger
    ) -> OperatorRouter {
        let listing = DeviceListing(store: store, agents: control, leases: leases, liveFlow: liveFlow, clock: clock)
        let catalog = TakeCatalog(store: store, agents: control, collections: collections)
        let handlers = OperatorHandlers(
            listings: FleetListingHandler(
                store: store, listing: listing, statistics: reporter, events: events, rejections: rejections, ports: ports, logger: logger),
            frames: FrameHandler(ingest: ingest, liveFlow: liveFlow, clock: clock),
            devices: DeviceHandler(
                store: store, agents: control, leases: leases, listing: listing, takes: takes, clock: clock,
                alignmentGridOrigin: alignmentGridOrigin),
            takes: TakeHandler(store: store, takes: takes, catalog: catalog, collections: collections, clock: clock),
            recordingFiles: RecordingFilesHandler(
                store: store, agents: control, agentTakes: agentTakes, events: events, clock: clock, logger: logger),
            stills: StillHandler(store: store, stills: stills, clock: clock),
            access: AccessHandler(store: store, leases: leases, coordinatorKey: coordinatorKey, clock: clock, logger: logger),
            nodeAccess: NodeAccessHandler(
                store: store, agents: control, ingest: ingest, liveFlow: liveFlow, events: events, clock: clock, logger: logger),
            dashboardAccess: DashboardAccessHandler(store: store, ports: ports, clock: clock),
            consent: ConsentHandler(store: store, agents: control, takes: takes, events: events, clock: clock, logger: logger),
            backup: BackupHandler(store: store, backups: backups, clock: clock, logger: logger))
        return OperatorRouter(
            endpoint: endpoint,
            authorization: OperatorAuthorization(store: store, rejections: rejections, clock: clock, logger: logger),
            leases: leases, rejections: rejections, handlers: handlers, logger: logger)
    }
}

/// What opening the coordinator's parts needs beyond the parts themselves: binding with an
/// error a user can act on, the metrics server, the coordinator's identity.
extension CoordinatorAssembly {
    static func bind<T>(_ what: String, _ port: UInt16, _ make: () throws -> T) throws -> T {
        do {
            return try make()
        } catch let error as ZMQError where error.errno == EADDRINUSE {
            throw CoordinatorError.portInUse(endpoint: what, port: port)
        }
    }

    /// The HTTP port: `/metrics` for Prometheus (HEAD too) and the web dashboard; anything
    /// else is 404 saying what is served.
    static func serveHTTP(
        _ metrics: FleetMetrics, dashboard: DashboardRoutes, configuration: CoordinatorConfiguration, port: UInt16,
        logger: Logger
    ) async throws -> WebServer {
        let router = Router(context: WebRequestContext.self, options: .autoGenerateHeadEndpoints)
        router.add(middleware: ExplainedNotFound("CaptureFleet serves its dashboard at / and Prometheus metrics at /metrics"))
        dashboard.add(to: router)
        router.get("/metrics") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: metrics.exposition())))
        }
        for method in [HTTPRequest.Method.post, .put, .delete, .patch] {
            router.on("/metrics", method: method) { _, _ in
                Response(
                    status: .methodNotAllowed, headers: [.allow: "GET, HEAD", .contentType: "text/plain; charset=utf-8"],
                    body: .init(byteBuffer: ByteBuffer(string: "only GET and HEAD are served here\n")))
            }
        }
        let tls = configuration.httpTLS.map { TLSFiles(certificatePath: $0.certificatePath, keyPath: $0.keyPath) }
        do {
            return try await WebServer.start(host: configuration.httpBind, port: port, tls: tls, router: router, logger: logger)
        } catch {
            if case .portInUse = error { throw CoordinatorError.portInUse(endpoint: "HTTP (dashboard and metrics)", port: port) }
            throw error
        }
    }

    /// The coordinator's identity, created on first start and kept with its data.
    static func coordinatorID(in directory: String) throws -> String {
        let path = directory + "/coordinator-id"
        if let existing = try? String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), !existing.isEmpty {
            return existing
        }
        let id = "coord-" + UUID().uuidString.lowercased().prefix(8)
        try (id + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return id
    }
}

/// Lets the rejection counter, made before the telemetry socket it publishes on, reach the
/// events once they exist.
final class EventsBox: @unchecked Sendable {
    private let lock = NSLock()
    private var value: FleetEvents?
    var events: FleetEvents? {
        get { lock.withLock { value } }
        set { lock.withLock { value = newValue } }
    }
}
