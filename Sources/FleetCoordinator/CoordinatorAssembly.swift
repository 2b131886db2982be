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
/// - the readers of the control dialog's node events (takes, detections, live flow) stop
///   after it, so none misses what it published;
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
        let base = try await Base.open(configuration, logger: logger)
        let sockets = try await Sockets.bind(configuration, base: base, logger: logger)
        let fleet = try await Fleet.open(configuration, base: base, sockets: sockets, logger: logger)
        let door = try await Door.open(configuration, base: base, sockets: sockets, fleet: fleet, logger: logger)
        let endpoints = announce(configuration, base: base, sockets: sockets, door: door, logger: logger)
        return CoordinatorAssembly(
            parts: shutdownOrder(base: base, sockets: sockets, fleet: fleet, door: door, beatClock: beatClock, logger: logger),
            endpoints: endpoints, directoryLock: base.directoryLock)
    }

    /// The HTTP port held (nil: it is off), refused with the coordinator's words if in use.
    static func reserveHTTP(_ configuration: CoordinatorConfiguration) throws -> HTTPPortReservation? {
        guard let port = configuration.metricsPort else { return nil }
        do {
            return try HTTPPortReservation(host: configuration.httpBind, port: port)
        } catch {
            if case .portInUse = error { throw CoordinatorError.portInUse(endpoint: "HTTP (dashboard and metrics)", port: port) }
            throw error
        }
    }

    /// The parts as services, in shutdown order read backwards: see the type's comment.
    static func shutdownOrder(
        base: Base, sockets: Sockets, fleet: Fleet, door: Door, beatClock: any Clock<Duration>, logger: Logger
    ) -> [any Service] {
        let (telemetry, ingest, record, agentTakes) = (sockets.telemetry, sockets.ingest, sockets.record, sockets.agentTakes)
        let (control, takes, stills, liveFlow, reporter) = (fleet.control, fleet.takes, fleet.stills, fleet.liveFlow, fleet.reporter)
        let (rejections, nodeEvents) = (sockets.rejections, fleet.nodeEvents)
        let parts: [(any Service)?] = [
            StoppingService("ZAP handler") { sockets.zap.stop() },
            StoppingService("telemetry endpoint") { telemetry.stop() },
            // Refusals are published and audited while the telemetry endpoint and the store are open.
            StoppingService("refusal reports", run: { await fleet.rejectionReporter.follow(rejections.logged) }) {
                rejections.finishTelling()
            },
            StoppingService("stored counters") {
                do {
                    try await reporter.flushCounters()
                } catch {
                    logger.error("could not store the final counters", metadata: ["error": "\(error)"])
                }
            },
            StoppingService("alert delivery") { fleet.alerts.stop() },
            door.http.map { server in
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
                await door.liveFeed.close()
                await door.liveViews.stop()
            },
            StoppingService("clock endpoint") { sockets.clock.stop() },
            // Follows the viewers until ingest closes the live endpoint.
            StoppingService("frame ingest", run: { await liveFlow.follow(ingest.liveSubscriptions) }) { ingest.stop() },
            // After the record endpoint, which hands it chunks.
            StoppingService("collector") { await sockets.collector.stop() },
            StoppingService("record endpoint") { record.stop() },
            StoppingService("agent-held takes", run: { await takes.follow(agentTakes.reports) }) { agentTakes.finishReports() },
            StoppingService("agent-held stills", run: { await stills.follow(agentTakes.stillNews) }) { agentTakes.finishStillNews() },
            // Open segments are finished so they play; the takes go on at the next start.
            StoppingService("takes") { await takes.shutdown() },
            // The node events' readers stop after the control dialog that publishes them.
            StoppingService("takes' node events", run: { await takes.follow(nodeEvents: nodeEvents.takes.events) }) {
                nodeEvents.takes.end()
            },
            StoppingService("detections", run: { await fleet.detections.follow(nodeEvents.detections.events) }) {
                nodeEvents.detections.end()
            },
            StoppingService("sensor data", run: { await fleet.sensorData.follow(nodeEvents.sensorData.events) }) {
                nodeEvents.sensorData.end()
            },
            StoppingService("moment rules", run: { await fleet.moments.triggers.follow(nodeEvents.moments.events) }) {
                nodeEvents.moments.end()
            },
            StoppingService("live flow's node events", run: { await liveFlow.follow(nodeEvents: nodeEvents.liveFlow.events) }) {
                nodeEvents.liveFlow.end()
            },
            StoppingService("control endpoint", run: { await control.serve() }) { sockets.control.stop() },
            // After control: an operator's request may command agents.
            StoppingService("operator endpoint", run: { await door.operators.serve() }) { sockets.operators.stop() },
            PeriodicService("node liveness", every: .milliseconds(250), clock: beatClock) {
                await control.expireSilentNodes()
                await fleet.leases.expire()
            },
            PeriodicService("telemetry reporter", every: .seconds(1), clock: beatClock) { await reporter.tick() },
            // Reads the fleet only while a browser watches.
            PeriodicService("dashboard live feed", every: .seconds(1), clock: beatClock) { await door.liveFeed.tick() },
            PeriodicService("live frame leases", every: .seconds(1), clock: beatClock) { await liveFlow.renew() },
            PeriodicService("recording housekeeper", every: .seconds(5), clock: beatClock, firstTick: .atStart) {
                await fleet.housekeeper.tick()
            },
            PeriodicService("daily offloads", every: .seconds(5), clock: beatClock) { await fleet.offloads.scheduleTick() },
            // Stopped first: says that shutdown has begun.
            StoppingService("shutdown notice") {
                logger.info("coordinator stopping")
                SystemdNotifier.stopping()
            },
        ]
        return parts.compactMap { $0 }
    }

    /// Where the coordinator is reached, said in the log once it is ready.
    static func announce(
        _ configuration: CoordinatorConfiguration, base: Base, sockets: Sockets, door: Door, logger: Logger
    ) -> CoordinatorEndpoints {
        let endpoints = CoordinatorEndpoints(
            control: sockets.control.boundEndpoint, frameIngest: sockets.ingest.boundEndpoint,
            operator: sockets.operators.boundEndpoint, telemetry: sockets.telemetry.boundEndpoint,
            database: configuration.databasePath, publicKey: base.keys.publicKey,
            publicKeyFile: CoordinatorKeys.publicPath(dataDirectory: configuration.dataDirectory),
            metrics: door.http.map {
                "\(configuration.httpTLS == nil ? "http" : "https")://\(configuration.httpDisplayHost):\($0.port)/metrics"
            })
        logger.info(
            "coordinator ready",
            metadata: [
                "control": "\(endpoints.control)", "ingest": "\(endpoints.frameIngest)", "operator": "\(endpoints.operator)",
                "telemetry": "\(endpoints.telemetry)", "clock": "\(sockets.clock.boundEndpoint)",
                "record": "\(sockets.record.boundEndpoint)", "live": "\(sockets.ingest.liveEndpoint ?? "off")",
                "database": "\(endpoints.database)", "metrics": "\(endpoints.metrics ?? "off")",
                "public_key": "\(base.keys.publicKey.z85)",
            ])
        return endpoints
    }
}

/// The operator door: its router and a handler per topic, each given only what it uses.
extension CoordinatorAssembly {
    static func operatorRouter(
        store: FleetDatabase, endpoint: RouterEndpoint, ports: Capfleet_V1_CoordinatorEndpoints, sockets: Sockets, fleet: Fleet,
        coordinatorKey: CurvePublicKey, alignmentGridOrigin: UInt64, exposureTruth: ExposureAudit.Truth, clock: CoordinatorClock,
        backups: DatabaseBackups, storageSecrets: StorageSecrets, logger: Logger
    ) -> OperatorRouter {
        let (control, leases, liveFlow, takes, ingest) = (fleet.control, fleet.leases, fleet.liveFlow, fleet.takes, sockets.ingest)
        let (events, rejections, collections) = (sockets.events, sockets.rejections, fleet.collections)
        let listing = DeviceListing(store: store, agents: control, leases: leases, liveFlow: liveFlow, clock: clock)
        let offloads = fleet.offloads
        let catalog = TakeCatalog(store: store, agents: control, collections: collections, offloads: offloads, sync: takes.sync)
        let handlers = OperatorHandlers(
            listings: FleetListingHandler(
                store: store, listing: listing, statistics: fleet.reporter, events: events, rejections: rejections, ports: ports, logger: logger,
                framingPolicy: takes.configuration.framingPolicy),
            frames: FrameHandler(ingest: ingest, liveFlow: liveFlow, clock: clock),
            devices: DeviceHandler(
                store: store, agents: control, leases: leases, listing: listing, takes: takes, clock: clock,
                alignmentGridOrigin: alignmentGridOrigin, exposureTruth: exposureTruth),
            takes: TakeHandler(store: store, takes: takes, catalog: catalog, collections: collections, offloads: offloads, clock: clock),
            recordingFiles: RecordingFilesHandler(
                store: store, agents: control, agentLinks: fleet.links, copies: DestinationCopies(store: store, secrets: storageSecrets),
                events: events, clock: clock, logger: logger),
            stills: StillHandler(store: store, stills: fleet.stills, clock: clock),
            moments: MomentHandler(taker: fleet.moments.taker, store: store, catalog: catalog),
            momentRules: MomentRuleHandler(store: store, triggers: fleet.moments.triggers, clock: clock),
            storage: StorageHandler(store: store, secrets: storageSecrets, clock: clock),
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
        _ metrics: FleetMetrics, dashboard: DashboardRoutes, configuration: CoordinatorConfiguration,
        on reserved: HTTPPortReservation, logger: Logger
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
            return try await WebServer.start(on: reserved, tls: tls, router: router, logger: logger)
        } catch {
            if case .portInUse = error { throw CoordinatorError.portInUse(endpoint: "HTTP (dashboard and metrics)", port: reserved.port) }
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
