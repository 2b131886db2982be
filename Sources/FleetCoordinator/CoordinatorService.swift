import FleetBus
import FleetDaemon
import FleetHost
import Foundation
import Logging
import ServiceLifecycle

/// The coordinator: binds the control, frame ingest, operator and telemetry endpoints,
/// keeps the fleet's state in SQLite, and runs until graceful shutdown.
///
/// Its parts run as a group of their own (CoordinatorAssembly lists them); that group
/// follows the graceful shutdown of the group this service runs in, and stops the parts in
/// reverse of their list.
public final class CoordinatorService: Service, Sendable {
    private let configuration: CoordinatorConfiguration
    private let logger: Logger
    private let beatClock: any Clock<Duration>
    private let onReady: @Sendable (CoordinatorEndpoints) -> Void

    /// - Parameters:
    ///   - beatClock: what the periodic parts (node liveness, the telemetry reporter, the
    ///     recording housekeeper) tick on.
    ///   - onReady: called once every endpoint is bound and the store is open.
    public init(
        configuration: CoordinatorConfiguration, logger: Logger, beatClock: any Clock<Duration> = ContinuousClock(),
        onReady: @escaping @Sendable (CoordinatorEndpoints) -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.logger = logger
        self.beatClock = beatClock
        self.onReady = onReady
    }

    public func run() async throws {
        let assembly = try await CoordinatorAssembly.open(configuration: configuration, logger: logger, beatClock: beatClock)
        let endpoints = assembly.endpoints
        onReady(endpoints)
        // Sockets bound and the store open: a `Type=notify` unit counts as started from here.
        SystemdNotifier.ready(status: "serving: control \(endpoints.control), operator \(endpoints.operator), database \(endpoints.database)")
        try await ServiceGroup.daemon(assembly.parts, logger: logger).run()
        // The data directory stays locked until every part has stopped.
        withExtendedLifetime(assembly.directoryLock) {}
        logger.info("coordinator stopped")
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
