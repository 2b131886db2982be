import CZeroMQ
import FleetBus
import FleetCore
import FleetHTTP
import FleetHost
import FleetProtocol
import FleetRecording
import FleetStore
import Foundation
import Logging
import ServiceLifecycle

/// The coordinator: binds the control, frame ingest, operator and telemetry endpoints,
/// keeps the fleet's state in SQLite, and runs until graceful shutdown.
public final class CoordinatorService: Service, Sendable {
    private let configuration: CoordinatorConfiguration
    private let logger: Logger
    private let onReady: @Sendable (CoordinatorEndpoints) -> Void

    public init(configuration: CoordinatorConfiguration, logger: Logger, onReady: @escaping @Sendable (CoordinatorEndpoints) -> Void = { _ in }) {
        self.configuration = configuration
        self.logger = logger
        self.onReady = onReady
    }

    public func run() async throws {
        try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true)
        let directoryLock = try DataDirectoryLock.acquire(dataDirectory: configuration.dataDirectory)
        defer { withExtendedLifetime(directoryLock) {} }
        let store = try FleetDatabase(path: configuration.databasePath)
        try await store.markAllNodesOffline(at: Date().unixMilliseconds)
        // Segments a crash left open are made to play again before anything records anew.
        for report in try await SegmentRecovery.recoverOpenSegments(in: store, clock: { Date().unixMilliseconds }) {
            logger.notice("recording segment left open by a crash", metadata: ["path": "\(report.path)", "outcome": "\(report.note)"])
        }
        let coordinatorID = try Self.coordinatorID(in: configuration.dataDirectory)

        let keys = try CoordinatorKeys.loadOrCreate(dataDirectory: configuration.dataDirectory)

        // Decrypting frames must never hold up a heartbeat: frames and control on separate I/O threads.
        let context = ZMQContext.withSeparateLanes()
        let metrics = FleetMetrics()
        let eventsBox = EventsBox()
        let rejections = RejectionCounter(logger: logger) { endpoint, reason, peer, detail in
            eventsBox.events?.emit(reason.isAccessDenial ? .accessDenied : .inputRejected,
                                   message: "\(endpoint): \(reason.rawValue) from \(peer)" + (detail.isEmpty ? "" : ": \(detail)"))
            guard reason.isAccessDenial, reason != .forbidden else { return }
            // Logged (and so audited) at most once a minute per endpoint, reason and peer.
            Task {
                try? await store.appendAudit(AuditEntry(at: Date().unixMilliseconds, actor: "peer:\(peer)", action: "access.denied",
                                                        target: endpoint, outcome: "refused", detail: "\(reason.rawValue): \(detail)"))
            }
        }
        let gate = try await AccessGate(store: store, rejections: rejections, logger: logger)
        // Bound before any endpoint: libzmq lets everyone in while no ZAP handler is bound.
        let zap = try ZAPHandler(context: context) { gate.decide($0) }
        let security = { (domain: AccessGate.Domain) in
            CurveServerSecurity(keys: keys, domain: domain.rawValue) { domain, event in gate.handshakeFailed(domain: domain, event: event) }
        }
        let telemetry = try bind("telemetry", configuration.telemetryPort) {
            try TelemetryPublisherSocket(context: context, bind: configuration.endpoint(configuration.telemetryPort), security: security(.telemetry))
        }
        let events = FleetEvents(telemetry: telemetry, metrics: metrics)
        eventsBox.events = events
        let ingest = try bind("frame ingest", configuration.frameIngestPort) {
            try FrameIngest(context: context, bind: configuration.endpoint(configuration.frameIngestPort), rejections: rejections,
                            security: security(.ingest),
                            admits: { userID, nodeID, fd, peer in gate.admitsFrame(userID: userID, nodeID: nodeID, fd: fd, peer: peer) })
        }
        // One fleet time for the clock endpoint and everything that reads it.
        let fleetTime = FleetTimeSource()
        let clock = try bind("clock", configuration.clockPort) {
            try ClockEndpoint(context: context, bind: configuration.endpoint(configuration.clockPort), security: security(.clock),
                              fleetTime: fleetTime, coordinatorID: coordinatorID, rejections: rejections)
        }
        let arrivals = ArrivalLedger()
        let controlEndpoint = try bind("control", configuration.controlPort) {
            try RouterEndpoint(name: "control", context: context, bind: configuration.endpoint(configuration.controlPort),
                               maxMessageBytes: 16 * 1024 * 1024, security: security(.control), onReceive: { arrivals.note($0) })
        }
        let operatorEndpoint = try bind("operator", configuration.operatorPort) {
            try RouterEndpoint(name: "operator", context: context, bind: configuration.endpoint(configuration.operatorPort),
                               maxMessageBytes: 1024 * 1024, security: security(.operator))
        }
        let alerts = AlertCenter(configuration: configuration.alerts, events: events, metrics: metrics,
                                 coordinatorID: coordinatorID, logger: logger)
        let control = ControlHandler(configuration: configuration, store: store, endpoint: controlEndpoint, arrivals: arrivals, ingest: ingest,
                                     events: events, alerts: alerts, rejections: rejections, gate: gate, coordinatorID: coordinatorID,
                                     fleetTime: fleetTime, clock: .system(fleetTime), logger: logger)
        let writers = TakeWriters()
        let recordEndpoint = try bind("recording", configuration.recordPort) {
            try RecordEndpoint(context: context, bind: configuration.endpoint(configuration.recordPort), security: security(.record),
                               rejections: rejections, gate: gate, writers: writers)
        }
        let takes = TakeDirector(store: store, agents: control, writers: writers, events: events, clock: .system(fleetTime),
                                 configuration: configuration, logger: logger,
                                 sendRecordDown: { routing, message in recordEndpoint.send(to: routing, message) },
                                 currentPixelFormat: { ingest.state(of: $0)?.layout.pixelFormat })
        try await takes.resumeUnfinished()
        recordEndpoint.start()
        await control.followTakes(
            recordPort: recordEndpoint.boundPort,
            registered: { nodeID in await takes.nodeRegistered(nodeID) },
            offline: { nodeID in await takes.nodeOffline(nodeID) },
            deviceEvent: { deviceID, kind, detail in await takes.deviceEvent(deviceID, kind: kind, detail: detail) })
        let housekeeper = RecordingHousekeeper(store: store, events: events, metrics: metrics, configuration: configuration, logger: logger)
        let leases = LeaseKeeper(store: store, events: events, logger: logger)
        try await leases.load()
        let reporter = TelemetryReporter(store: store, ingest: ingest, control: control, telemetry: telemetry, metrics: metrics,
                                         rejections: rejections, alerts: alerts, logger: logger)
        let metricsServer = try configuration.metricsPort.map { port in try serveMetrics(metrics, port: port) }
        let operators = OperatorHandler(store: store, endpoint: operatorEndpoint, ingest: ingest, control: control,
                                        reporter: reporter, rejections: rejections, leases: leases, events: events,
                                        coordinatorKey: keys.publicKey, fleetTime: fleetTime, clock: .system(fleetTime), takes: takes,
                                        backups: DatabaseBackups(dataDirectory: configuration.dataDirectory, store: store), logger: logger)

        let endpoints = CoordinatorEndpoints(control: controlEndpoint.boundEndpoint, frameIngest: ingest.boundEndpoint,
                                             operator: operatorEndpoint.boundEndpoint, telemetry: telemetry.boundEndpoint,
                                             database: configuration.databasePath, publicKey: keys.publicKey,
                                             publicKeyFile: CoordinatorKeys.publicPath(dataDirectory: configuration.dataDirectory),
                                             metrics: metricsServer.map { "http://\(configuration.displayHost):\($0.port)/metrics" })
        logger.info("coordinator ready", metadata: [
            "control": "\(endpoints.control)", "ingest": "\(endpoints.frameIngest)", "operator": "\(endpoints.operator)",
            "telemetry": "\(endpoints.telemetry)", "clock": "\(clock.boundEndpoint)", "record": "\(recordEndpoint.boundEndpoint)", "database": "\(endpoints.database)",
            "metrics": "\(endpoints.metrics ?? "off")",
            "public_key": "\(keys.publicKey.z85)",
        ])
        onReady(endpoints)
        // Sockets bound and the store open: a `Type=notify` unit counts as started from here.
        SystemdNotifier.ready(status: "serving: control \(endpoints.control), operator \(endpoints.operator), database \(endpoints.database)")

        await withDiscardingTaskGroup { group in
            group.addTask { await control.serve() }
            group.addTask { await operators.serve() }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(250))
                    await control.expireSilentNodes()
                    await leases.expire()
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(1))
                    await reporter.tick()
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    await housekeeper.tick()
                    try? await Task.sleep(for: .seconds(5))
                }
            }
            try? await gracefulShutdown()
            logger.info("coordinator stopping")
            SystemdNotifier.stopping()
            group.cancelAll()
            controlEndpoint.stop()
            operatorEndpoint.stop()
        }
        // Open segments are finished so they play; the takes go on at the next start.
        await takes.shutdown()
        recordEndpoint.stop()
        ingest.stop()
        clock.stop()
        metricsServer?.stop()
        alerts.stop()
        do {
            try await reporter.flushCounters()
        } catch {
            logger.error("could not store the final counters", metadata: ["error": "\(error)"])
        }
        telemetry.stop()
        // Last: with the endpoints closed nothing can slip in while no handler is bound.
        zap.stop()
        logger.info("coordinator stopped")
    }

    private func bind<T>(_ what: String, _ port: UInt16, _ make: () throws -> T) throws -> T {
        do {
            return try make()
        } catch let error as ZMQError where error.errno == EADDRINUSE {
            throw CoordinatorError.portInUse(endpoint: what, port: port)
        }
    }

    /// `/metrics` for Prometheus on a thread of its own; anything else is 404.
    private func serveMetrics(_ metrics: FleetMetrics, port: UInt16) throws -> HTTPServer {
        do {
            return try HTTPServer(host: configuration.bindHost, port: port) { request in
                guard request.method == "GET" || request.method == "HEAD" else {
                    return HTTPResponse(status: 405, text: "only GET and HEAD are served here\n")
                }
                guard request.path == "/metrics" else {
                    return HTTPResponse(status: 404, text: "CaptureFleet serves Prometheus metrics at /metrics\n")
                }
                return HTTPResponse(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: metrics.exposition())
            }
        } catch {
            if case let .cannotBind(_, _, code) = error, code == EADDRINUSE {
                throw CoordinatorError.portInUse(endpoint: "metrics (HTTP)", port: port)
            }
            throw error
        }
    }

    /// The coordinator's identity, created on first start and kept with its data.
    private static func coordinatorID(in directory: String) throws -> String {
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
private final class EventsBox: @unchecked Sendable {
    private let lock = NSLock()
    private var value: FleetEvents?
    var events: FleetEvents? {
        get { lock.withLock { value } }
        set { lock.withLock { value = newValue } }
    }
}

/// Where a running coordinator can be reached.
public struct CoordinatorEndpoints: Sendable {
    public let control: String
    public let frameIngest: String
    public let `operator`: String
    public let telemetry: String
    public let database: String
    /// The coordinator's CURVE public key, which every agent and operator must know.
    public let publicKey: CurvePublicKey
    public let publicKeyFile: String
    /// The Prometheus scrape URL, nil when the endpoint is off.
    public let metrics: String?
}

public enum CoordinatorError: Error, CustomStringConvertible {
    case portInUse(endpoint: String, port: UInt16)

    public var description: String {
        switch self {
        case let .portInUse(endpoint, port):
            "cannot bind the \(endpoint) endpoint: port \(port) is in use. Is another coordinator (or `capfleet dev`) running? Stop it, or choose other ports in the configuration."
        }
    }
}
