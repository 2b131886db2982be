import FleetCore
import FleetProtocol
import FleetStore
import Logging

/// The shell of the coordinator's `LeaseBook`: asks it, and performs what it decided. The
/// book decides synchronously on this actor; the store writes run one after another in the
/// order of those decisions (a lock and an unlock answered at once are stored in that
/// order), and a write the store refuses goes back to the book and to whoever asked.
actor LeaseKeeper {
    /// What a lock or unlock came to, as the operator's reply says it.
    enum Answer: Sendable {
        case granted(ConfigurationLeases.Lease)
        case refused(ConfigurationLeases.Refusal)
        /// Decided, but the store refused to record it: nothing changed.
        case notStored(StoreError)

        var status: Capfleet_V1_Status {
            switch self {
            case .granted: .with { $0.code = .ok }
            case let .refused(refusal): .failure(.permissionDenied, refusal.description)
            case let .notStored(error): .failure(.internal, "the lease was not changed: \(error)")
            }
        }
    }

    private var book = LeaseBook()
    /// The last batch of writes handed to the store; the next one waits for it.
    private var lastWrites: Task<[Failure], Never>?
    private let store: FleetDatabase
    private let events: FleetEvents
    private let logger: Logger
    private let clock: CoordinatorClock

    init(store: FleetDatabase, events: FleetEvents, clock: CoordinatorClock, logger: Logger) {
        self.store = store
        self.events = events
        self.clock = clock
        self.logger = logger
    }

    private var now: UInt64 { UInt64(max(clock.unixMilliseconds(), 0)) }

    /// Takes up the leases stored before a restart that have not run out.
    func load() async throws(StoreError) {
        let records = try await store.leases()
        let now = self.now
        for record in records {
            book.restore(record.deviceId, holder: record.holder, expiresAt: UInt64(max(record.expiresAt, 0)), session: record.sessionId, now: now)
        }
    }

    func lease(of deviceID: String) -> ConfigurationLeases.Lease? { book.lease(of: deviceID, now: now) }

    /// The leases in force on any of `deviceIDs`, in one look.
    func leases(of deviceIDs: [String]) -> [String: ConfigurationLeases.Lease] {
        let now = self.now
        var held: [String: ConfigurationLeases.Lease] = [:]
        for deviceID in deviceIDs { held[deviceID] = book.lease(of: deviceID, now: now) }
        return held
    }

    func authorize(_ deviceID: String, by holder: String) -> Result<ConfigurationLeases.Lease, ConfigurationLeases.Refusal> {
        book.authorize(deviceID, by: holder, now: now)
    }

    /// A change by `holder` begins under the device's lease, which then holds until `endChange`.
    func beginChange(_ deviceID: String, by holder: String) -> Result<ConfigurationLeases.Lease, ConfigurationLeases.Refusal> {
        book.beginChange(deviceID, by: holder, now: now)
    }

    func endChange(_ deviceID: String) { book.endChange(deviceID) }

    /// An operator request that carries a session id: the session is alive.
    func heard(session sessionID: String, timeoutMilliseconds: UInt32) {
        book.heard(session: sessionID, timeoutMilliseconds: timeoutMilliseconds, now: now)
    }

    func lock(_ deviceID: String, by holder: String, seconds: UInt32, session sessionID: String? = nil) async -> Answer {
        await answer(book.lock(deviceID, by: holder, seconds: seconds, session: sessionID, now: now))
    }

    func unlock(_ deviceID: String, by holder: String) async -> Answer {
        await answer(book.unlock(deviceID, by: holder, now: now))
    }

    /// The operator said goodbye: its session's leases are released at once.
    func endSession(_ sessionID: String) async {
        _ = await perform(book.endSession(sessionID))
    }

    /// Releases leases that ran out, and those of sessions that fell silent. Called a few
    /// times a second.
    func expire() async {
        _ = await perform(book.tick(now: now))
    }

    /// The operator `holder` was removed: their leases go, and so does any lease a request
    /// of theirs still on its way would take.
    func releaseAll(heldBy holder: String, detail: String) async {
        _ = await perform(book.holderRemoved(holder, detail: detail))
    }

    /// `holder` is (again) an operator of the fleet.
    func admitted(_ holder: String) { book.holderAdmitted(holder) }

    private func answer(_ decision: LeaseBook.Decision) async -> Answer {
        if let failure = await perform(decision.actions).first(where: \.undone) { return .notStored(failure.error) }
        switch decision.result {
        case let .success(lease): return .granted(lease)
        case let .failure(refusal): return .refused(refusal)
        }
    }

    /// Performs `actions` after every batch decided before them; returns what the store refused.
    private func perform(_ actions: [LeaseBook.Action]) async -> [Failure] {
        guard !actions.isEmpty else { return [] }
        let previous = lastWrites
        let writes = Task { [store, events, clock] in
            _ = await previous?.value
            return await Self.write(actions, store: store, events: events, at: clock.unixMilliseconds())
        }
        lastWrites = writes
        let failures = await writes.value
        return failures.map(settle)
    }

    /// A write the store refused goes back to the book, and is seen: in the requester's
    /// reply if it was undone, and in the log (and the events, for a release) either way.
    private func settle(_ failure: Failure) -> Failure {
        var failure = failure
        failure.undone = book.notStored(failure.action)
        switch failure.action {
        case let .store(lease, _, _, _):
            logger.error("cannot record a lease; it is not taken", metadata: ["device.id": "\(lease.deviceID)", "error": "\(failure.error)"])
        case let .remove(lease, _, answered):
            logger.error("cannot record a released lease", metadata: ["device.id": "\(lease.deviceID)", "error": "\(failure.error)"])
            if !answered {
                events.emit(
                    .leaseReleased, deviceID: lease.deviceID,
                    message: "lease of \(lease.holder) released, but the fleet database could not record it: \(failure.error)")
            }
        case let .audit(line):
            logger.error("cannot audit a lease request", metadata: ["device.id": "\(line.target)", "error": "\(failure.error)"])
        case .announce:
            break
        }
        return failure
    }

    struct Failure: Sendable {
        let action: LeaseBook.Action
        let error: StoreError
        /// The book undid the decision: its requester is told it failed.
        var undone = false
    }

    private static func write(_ actions: [LeaseBook.Action], store: FleetDatabase, events: FleetEvents, at now: UnixMilliseconds) async -> [Failure] {
        var failures: [Failure] = []
        for action in actions {
            do throws(StoreError) {
                switch action {
                case let .store(lease, acquiredAt, _, audit):
                    try await store.saveLease(
                        LeaseRecord(
                            deviceId: lease.deviceID, holder: lease.holder, acquiredAt: Int64(acquiredAt),
                            expiresAt: Int64(lease.expiresAt), sessionId: lease.sessionID),
                        audit: entry(audit, at: now))
                case let .remove(lease, audit, _):
                    try await store.removeLease(
                        deviceID: lease.deviceID, holder: lease.holder, expiresAt: Int64(lease.expiresAt),
                        audit: entry(audit, at: now))
                case let .audit(audit):
                    try await store.appendAudit(entry(audit, at: now))
                case let .announce(deviceID, message):
                    events.emit(.leaseReleased, deviceID: deviceID, message: message)
                }
            } catch {
                failures.append(Failure(action: action, error: error))
            }
        }
        return failures
    }

    private static func entry(_ audit: LeaseBook.Audit, at now: UnixMilliseconds) -> AuditEntry {
        AuditEntry(at: now, actor: audit.actor, action: audit.action, target: audit.target, outcome: audit.outcome, detail: audit.detail)
    }
}
