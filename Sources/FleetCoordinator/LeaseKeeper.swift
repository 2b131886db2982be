import FleetCore
import FleetStore
import Foundation
import Logging

/// The coordinator's configuration leases: the pure `ConfigurationLeases` on wall-clock
/// milliseconds (leases outlive a coordinator restart), with every change stored and
/// audited in the same transaction.
actor LeaseKeeper {
    static let defaultSeconds: UInt32 = 300
    static let maximumSeconds: UInt32 = 24 * 3600

    private var leases = ConfigurationLeases()
    private let store: FleetDatabase
    private let logger: Logger

    init(store: FleetDatabase, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    private static var now: UInt64 { UInt64(max(Date().unixMilliseconds, 0)) }

    /// Takes up the leases stored before a restart that have not run out.
    func load() async throws(StoreError) {
        let now = Self.now
        for record in try await store.leases() where UInt64(record.expiresAt) > now {
            _ = leases.acquire(record.deviceId, by: record.holder, for: UInt64(record.expiresAt) - now, now: now)
        }
    }

    func lease(of deviceID: String) -> ConfigurationLeases.Lease? {
        leases.leases[deviceID].flatMap { $0.expiresAt > Self.now ? $0 : nil }
    }

    func authorize(_ deviceID: String, by holder: String) -> Result<ConfigurationLeases.Lease, ConfigurationLeases.Refusal> {
        leases.authorize(deviceID, by: holder, now: Self.now)
    }

    func lock(_ deviceID: String, by holder: String, seconds: UInt32) async throws(StoreError) -> Result<ConfigurationLeases.Lease, ConfigurationLeases.Refusal> {
        await expire()  // a lease that ran out is recorded as expired before anyone takes over
        let now = Self.now
        let duration = UInt64(min(seconds == 0 ? Self.defaultSeconds : seconds, Self.maximumSeconds)) * 1000
        let result = leases.acquire(deviceID, by: holder, for: duration, now: now)
        switch result {
        case let .success(lease):
            try await store.saveLease(LeaseRecord(deviceId: deviceID, holder: holder, acquiredAt: Int64(now), expiresAt: Int64(lease.expiresAt)),
                                      audit: entry(holder, "lease.lock", deviceID, "ok", "until \(lease.expiresAt) (unix ms)"))
        case let .failure(refusal):
            try await store.appendAudit(entry(holder, "lease.lock", deviceID, "refused", refusal.description))
        }
        return result
    }

    func unlock(_ deviceID: String, by holder: String) async throws(StoreError) -> Result<ConfigurationLeases.Lease, ConfigurationLeases.Refusal> {
        await expire()
        let result = leases.release(deviceID, by: holder, now: Self.now)
        switch result {
        case .success:
            try await store.deleteLease(deviceID: deviceID, audit: entry(holder, "lease.unlock", deviceID, "ok", ""))
        case let .failure(refusal):
            try await store.appendAudit(entry(holder, "lease.unlock", deviceID, "refused", refusal.description))
        }
        return result
    }

    /// Releases leases that ran out. Called a few times a second.
    func expire() async {
        for lease in leases.expire(now: Self.now) {
            do {
                try await store.deleteLease(deviceID: lease.deviceID, audit: entry("coordinator", "lease.expire", lease.deviceID, "ok",
                                                                                   "held by \(lease.holder)"))
            } catch {
                logger.error("cannot record an expired lease", metadata: ["device.id": "\(lease.deviceID)", "error": "\(error)"])
            }
        }
    }

    private func entry(_ actor: String, _ action: String, _ target: String, _ outcome: String, _ detail: String) -> AuditEntry {
        AuditEntry(at: Date().unixMilliseconds, actor: actor, action: action, target: target, outcome: outcome, detail: detail)
    }
}
