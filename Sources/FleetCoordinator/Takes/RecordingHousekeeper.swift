import FleetCore
import FleetProtocol
import FleetRecording
import FleetStore
import FleetSystem
import Foundation
import Logging
import Prometheus

/// The coordinator's recordings disk as pressure (nominal … shutdown, on telemetry, in the
/// events and in Prometheus), reported before a full disk stops a take; and retention.
actor RecordingHousekeeper {
    private let store: FleetDatabase
    private let events: FleetEvents
    private let configuration: CoordinatorConfiguration
    private let metrics: FleetMetrics
    private let logger: Logger
    private var level = PressureLevel.nominal
    private let clock: CoordinatorClock
    /// Wall time of the last retention pass; nil before the first.
    private var lastRetention: UnixMilliseconds?
    private let levelGauge: Gauge
    private let freeGauge: Gauge

    nonisolated(unsafe) static let diskLevel = FleetMetrics.descriptor(
        "coordinator_recordings_disk_pressure_level", "",
        "Pressure from the disk holding recordings: 0 nominal, 1 fair (80% used), 2 serious (90%), 3 critical (95% or twice the reserve left), 4 shutdown (below the reserve: takes stop)."
    )
    nonisolated(unsafe) static let diskFree = FleetMetrics.descriptor(
        "coordinator_recordings_disk_free", "bytes", "Free space on the disk holding recordings.")

    init(
        store: FleetDatabase, events: FleetEvents, metrics: FleetMetrics, configuration: CoordinatorConfiguration,
        clock: CoordinatorClock, logger: Logger
    ) {
        self.store = store
        self.clock = clock
        self.events = events
        self.metrics = metrics
        self.configuration = configuration
        self.logger = logger
        levelGauge = metrics.registry.makeGauge(descriptor: Self.diskLevel)
        freeGauge = metrics.registry.makeGauge(descriptor: Self.diskFree)
    }

    /// The disk's level from its use and what is left against the reserve.
    static func level(usedFraction: Double, freeBytes: Int64, reserve: Int64) -> PressureLevel {
        if freeBytes < reserve { return .shutdown }
        if usedFraction >= 0.95 || freeBytes < 2 * reserve { return .critical }
        if usedFraction >= 0.90 { return .serious }
        if usedFraction >= 0.80 { return .fair }
        return .nominal
    }

    /// Every few seconds: the disk's level; every minute, retention.
    func tick() async {
        let directory = configuration.takesDirectory
        if let free = DiskSpace.availableBytes(at: directory), let total = DiskSpace.totalBytes(at: directory), total > 0 {
            let used = 1 - Double(free) / Double(total)
            let now = Self.level(usedFraction: used, freeBytes: free, reserve: configuration.recordReserveBytes)
            levelGauge.set(Double(now.rawValue))
            freeGauge.set(Double(free))
            if now != level {
                let message = String(
                    format: "the recordings disk (%@) is %.0f%% used, %@ free: coordinator pressure %@ (was %@)%@",
                    directory, used * 100, Self.size(free), "\(now)", "\(level)",
                    now >= .critical ? "; takes stop below the \(Self.size(configuration.recordReserveBytes)) reserve" : "")
                if now > level {
                    logger.warning("recordings disk pressure", metadata: ["detail": "\(message)"])
                } else {
                    logger.notice("recordings disk pressure", metadata: ["detail": "\(message)"])
                }
                events.emit(.pressureLevelChanged, nodeID: "coordinator", message: message)
                level = now
            }
        }
        let now = clock.unixMilliseconds()
        // A wall clock stepped back also counts as due, rather than pausing retention.
        if lastRetention.map({ now - $0 >= 60_000 || now < $0 }) ?? true {
            lastRetention = now
            await enforceRetention()
        }
    }

    func enforceRetention() async {
        let policy = configuration.retention
        guard policy.budgetBytes > 0 || policy.maximumAgeSeconds > 0 else { return }
        do {
            var entries: [(id: String, createdAt: UnixMilliseconds, bytes: Int64, recording: Bool)] = []
            for take in try await store.takes() {
                let segments = try await store.segments(takeID: take.id)
                // The coordinator's retention is about its own disk: a take with segments only
                // on agents' disks is theirs to keep (recordings_keep_days), never deleted here.
                guard !segments.contains(where: { $0.readablePath == nil }) else { continue }
                let bytes = segments.reduce(Int64(0)) { $0 + $1.sizeBytes }
                entries.append((take.id, take.createdAt, bytes, take.state == .recording))
            }
            let now = clock.unixMilliseconds()
            for id in policy.expired(entries, now: now) {
                guard let take = try await store.take(id: id), take.state != .recording else { continue }
                try await store.deleteTake(
                    id: id,
                    audit: AuditEntry(
                        at: clock.unixMilliseconds(), actor: "retention", action: "recording.delete",
                        target: id, outcome: "ok", detail: "retention: \(take.name)"))
                let directory = take.directory
                do {
                    try await OwnedThread.run("cf-retention") { try FileManager.default.removeItem(atPath: directory) }
                } catch {
                    // The index no longer lists the take: its files are left for the operator to remove.
                    logger.error(
                        "retention could not remove a deleted take's files",
                        metadata: ["take.id": "\(id)", "path": "\(directory)", "error": "\(error)"])
                }
                events.emit(.recording, message: "retention deleted take \(id) (\(take.name))")
                logger.notice("retention deleted a take", metadata: ["take.id": "\(id)"])
            }
        } catch {
            logger.error("retention could not run", metadata: ["error": "\(error)"])
        }
    }

    static func size(_ bytes: Int64) -> String { String(format: "%.1f GiB", Double(bytes) / Double(1 << 30)) }
}
