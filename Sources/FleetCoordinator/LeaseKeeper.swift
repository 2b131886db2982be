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

    /// How long an operator session may stay silent before its leases go.
    static let defaultSessionTimeoutMilliseconds: UInt32 = 10_000

    private var leases = ConfigurationLeases()
    private var sessions = OperatorSessions()
    private let store: FleetDatabase
    private let events: FleetEvents
    private let logger: Logger
    private let clock: CoordinatorClock

    init(store: FleetDatabase, events: FleetEvents, clock: CoordinatorClock = .standalone, logger: Logger) {
        self.store = store
        self.events = events
        self.clock = clock
        self.logger = logger
    }

    private var now: UInt64 { UInt64(max(clock.unixMilliseconds(), 0)) }

    /// Takes up the leases stored before a restart that have not run out.
    func load() async throws(StoreError) {
        let now = self.now
        for record in try await store.leases() where UInt64(record.expiresAt) > now {
            _ = leases.acquire(record.deviceId, by: record.holder, for: UInt64(record.expiresAt) - now, now: now, session: record.sessionId)
            // A session's holder gets one timeout from now to show it is still there.
            if let session = record.sessionId {
                sessions.heard(session, timeout: UInt64(Self.defaultSessionTimeoutMilliseconds), now: now)
            }
        }
    }

    func lease(of deviceID: String) -> ConfigurationLeases.Lease? {
        leases.leases[deviceID].flatMap { $0.expiresAt > now ? $0 : nil }
    }

    func authorize(_ deviceID: String, by holder: String) -> Result<ConfigurationLeases.Lease, ConfigurationLeases.Refusal> {
        leases.authorize(deviceID, by: holder, now: now)
    }

    /// An operator request that carries a session id: the session is alive.
    func heard(session sessionID: String, timeoutMilliseconds: UInt32) {
        guard !sessionID.isEmpty else { return }
        let timeout = timeoutMilliseconds == 0 ? Self.defaultSessionTimeoutMilliseconds : timeoutMilliseconds
        sessions.heard(sessionID, timeout: UInt64(timeout), now: now)
    }

    /// The operator said goodbye: its session's leases are released at once.
    func endSession(_ sessionID: String) async {
        guard !sessionID.isEmpty else { return }
        sessions.end(sessionID)
        await release(leases.releaseAll(inSession: sessionID), why: "session.end", detail: "the operator session ended")
    }

    func lock(_ deviceID: String, by holder: String, seconds: UInt32, session sessionID: String? = nil) async throws(StoreError)
        -> Result<ConfigurationLeases.Lease, ConfigurationLeases.Refusal> {
        await expire()  // a lease that ran out is recorded as expired before anyone takes over
        let now = self.now
        let duration = UInt64(min(seconds == 0 ? Self.defaultSeconds : seconds, Self.maximumSeconds)) * 1000
        let session = sessionID.flatMap { $0.isEmpty ? nil : $0 }
        let result = leases.acquire(deviceID, by: holder, for: duration, now: now, session: session)
        switch result {
        case let .success(lease):
            let scope = session.map { ", released when session \($0) ends" } ?? ""
            try await store.saveLease(LeaseRecord(deviceId: deviceID, holder: holder, acquiredAt: Int64(now), expiresAt: Int64(lease.expiresAt),
                                                  sessionId: session),
                                      audit: entry(holder, "lease.lock", deviceID, "ok", "until \(lease.expiresAt) (unix ms)\(scope)"))
        case let .failure(refusal):
            try await store.appendAudit(entry(holder, "lease.lock", deviceID, "refused", refusal.description))
        }
        return result
    }

    func unlock(_ deviceID: String, by holder: String) async throws(StoreError) -> Result<ConfigurationLeases.Lease, ConfigurationLeases.Refusal> {
        await expire()
        let result = leases.release(deviceID, by: holder, now: now)
        switch result {
        case .success:
            try await store.deleteLease(deviceID: deviceID, audit: entry(holder, "lease.unlock", deviceID, "ok", ""))
        case let .failure(refusal):
            try await store.appendAudit(entry(holder, "lease.unlock", deviceID, "refused", refusal.description))
        }
        return result
    }

    /// Releases leases that ran out, and those of sessions that fell silent (the operator
    /// disconnected). Called a few times a second.
    func expire() async {
        await release(leases.expire(now: now), why: "lease.expire", detail: "the lease ran out")
        for session in sessions.expire(now: now) {
            await release(leases.releaseAll(inSession: session), why: "session.lost",
                          detail: "operator session \(session) went silent (disconnected)")
        }
    }

    /// The operator `holder` is gone: their leases must not outlive them (a timed lease could
    /// otherwise keep a device locked for days by nobody).
    func releaseAll(heldBy holder: String, detail: String) async {
        await release(leases.releaseAll(heldBy: holder), why: "lease.holder_removed", detail: detail)
    }

    private func release(_ released: [ConfigurationLeases.Lease], why action: String, detail: String) async {
        for lease in released {
            do {
                try await store.deleteLease(deviceID: lease.deviceID, audit: entry("coordinator", action, lease.deviceID, "ok",
                                                                                   "held by \(lease.holder): \(detail)"))
            } catch {
                logger.error("cannot record a released lease", metadata: ["device.id": "\(lease.deviceID)", "error": "\(error)"])
            }
            events.emit(.leaseReleased, deviceID: lease.deviceID, message: "lease of \(lease.holder) released: \(detail)")
        }
    }

    private func entry(_ actor: String, _ action: String, _ target: String, _ outcome: String, _ detail: String) -> AuditEntry {
        AuditEntry(at: clock.unixMilliseconds(), actor: actor, action: action, target: target, outcome: outcome, detail: detail)
    }
}
