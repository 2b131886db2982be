/// The coordinator's configuration leases and the operator sessions that hold them, as one
/// pure machine on wall-clock milliseconds (leases outlive a coordinator restart). Events in
/// (a lock, an unlock, a session heard or gone, a tick, an operator removed, a write the
/// store refused), actions out (store, remove, audit, announce). The lease keeper (the
/// shell) performs the actions in the order they were decided. Every decision is taken here
/// in one step: what ran out is swept in the same step that grants, so two operators asking
/// for one device at once can never both find it free.
public struct LeaseBook: Sendable {
    public typealias Lease = ConfigurationLeases.Lease

    public static let defaultSeconds: UInt32 = 300
    public static let maximumSeconds: UInt32 = 24 * 3600
    /// How long an operator session may stay silent before its leases go.
    public static let defaultSessionTimeoutMilliseconds: UInt32 = 10_000

    /// One line of the audit log.
    public struct Audit: Sendable, Equatable {
        public let actor: String
        public let action: String
        public let target: String
        public let outcome: String
        public let detail: String

        public init(actor: String, action: String, target: String, outcome: String, detail: String) {
            self.actor = actor
            self.action = action
            self.target = target
            self.outcome = outcome
            self.detail = detail
        }
    }

    public enum Action: Sendable, Equatable {
        /// Stores a lease taken or renewed at `at`, with its audit line, in one transaction.
        /// `replacing` is what the device's lease was before, to go back to if the store refuses.
        case store(Lease, at: UInt64, replacing: Lease?, Audit)
        /// Removes the stored lease (only this one: a later lease on the device stays), with its
        /// audit line. `answered`: an operator's unlock waits on it, and keeps the lease if it fails.
        case remove(Lease, Audit, answered: Bool)
        case audit(Audit)
        /// A `leaseReleased` event for the fleet.
        case announce(deviceID: String, message: String)
    }

    /// The answer to a lock or unlock, and what to do for it: performed before the answer goes out.
    public struct Decision: Sendable, Equatable {
        public let result: Result<Lease, ConfigurationLeases.Refusal>
        public let actions: [Action]
    }

    private var leases = ConfigurationLeases()
    private var sessions = OperatorSessions()
    /// Operators removed while this coordinator runs: a request of theirs already in flight
    /// must not take a lease after their leases were released.
    private var removedHolders: Set<String> = []
    /// Changes on their way to a device under its lease, by device: the lease does not run
    /// out under them, so the authorization they were given holds until they are answered.
    private var changing: [String: Int] = [:]

    public init() {}

    // MARK: Questions

    /// The device's lease, unless it ran out (swept or not).
    public func lease(of deviceID: String, now: UInt64) -> Lease? {
        leases.leases[deviceID].flatMap { $0.expiresAt > now ? $0 : nil }
    }

    /// Whether `holder` may change `deviceID` now.
    public func authorize(_ deviceID: String, by holder: String, now: UInt64) -> Result<Lease, ConfigurationLeases.Refusal> {
        leases.authorize(deviceID, by: holder, now: now)
    }

    // MARK: Events

    /// A change to `deviceID` by `holder` begins, if they hold its lease; until `endChange`,
    /// the lease does not run out and nobody else can take it.
    public mutating func beginChange(_ deviceID: String, by holder: String, now: UInt64) -> Result<Lease, ConfigurationLeases.Refusal> {
        let result = leases.authorize(deviceID, by: holder, now: now)
        if case .success = result { changing[deviceID, default: 0] += 1 }
        return result
    }

    /// A change begun with `beginChange` was answered (or failed).
    public mutating func endChange(_ deviceID: String) {
        guard let count = changing[deviceID] else { return }
        changing[deviceID] = count > 1 ? count - 1 : nil
    }

    /// A lease stored before a restart, taken up again if it has not run out; its session
    /// gets one timeout from now to show it is still there.
    public mutating func restore(_ deviceID: String, holder: String, expiresAt: UInt64, session sessionID: String?, now: UInt64) {
        guard expiresAt > now else { return }
        _ = leases.acquire(deviceID, by: holder, for: expiresAt - now, now: now, session: sessionID)
        if let sessionID { sessions.heard(sessionID, timeout: UInt64(Self.defaultSessionTimeoutMilliseconds), now: now) }
    }

    /// An operator request that carries a session id: the session is alive.
    public mutating func heard(session sessionID: String, timeoutMilliseconds: UInt32, now: UInt64) {
        guard !sessionID.isEmpty else { return }
        let timeout = timeoutMilliseconds == 0 ? Self.defaultSessionTimeoutMilliseconds : timeoutMilliseconds
        sessions.heard(sessionID, timeout: UInt64(timeout), now: now)
    }

    /// Takes or renews the device's lease for `seconds` (0: the default; at most a day).
    /// Leases that ran out are recorded as expired first, in the same step.
    public mutating func lock(
        _ deviceID: String, by holder: String, seconds: UInt32, session sessionID: String?,
        now: UInt64
    ) -> Decision {
        var actions = tick(now: now)
        if removedHolders.contains(holder) {
            let refusal = ConfigurationLeases.Refusal.holderRemoved(holder)
            actions.append(.audit(Audit(actor: holder, action: "lease.lock", target: deviceID, outcome: "refused", detail: refusal.description)))
            return Decision(result: .failure(refusal), actions: actions)
        }
        if let current = leases.leases[deviceID], current.holder != holder, changing[deviceID] != nil {
            // Run out, but a change made under it is still on its way.
            let refusal = ConfigurationLeases.Refusal.heldByAnother(current)
            actions.append(.audit(Audit(actor: holder, action: "lease.lock", target: deviceID, outcome: "refused", detail: refusal.description)))
            return Decision(result: .failure(refusal), actions: actions)
        }
        let duration = UInt64(min(seconds == 0 ? Self.defaultSeconds : seconds, Self.maximumSeconds)) * 1000
        let session = sessionID.flatMap { $0.isEmpty ? nil : $0 }
        let before = lease(of: deviceID, now: now)
        let result = leases.acquire(deviceID, by: holder, for: duration, now: now, session: session)
        switch result {
        case let .success(lease):
            let scope = session.map { ", released when session \($0) ends" } ?? ""
            actions.append(
                .store(
                    lease, at: now, replacing: before,
                    Audit(
                        actor: holder, action: "lease.lock", target: deviceID, outcome: "ok",
                        detail: "until \(lease.expiresAt) (unix ms)\(scope)")))
        case let .failure(refusal):
            actions.append(.audit(Audit(actor: holder, action: "lease.lock", target: deviceID, outcome: "refused", detail: refusal.description)))
        }
        return Decision(result: result, actions: actions)
    }

    /// Gives a lease back; only its holder may.
    public mutating func unlock(_ deviceID: String, by holder: String, now: UInt64) -> Decision {
        var actions = tick(now: now)
        let result = leases.release(deviceID, by: holder, now: now)
        switch result {
        case let .success(lease):
            actions.append(.remove(lease, Audit(actor: holder, action: "lease.unlock", target: deviceID, outcome: "ok", detail: ""), answered: true))
        case let .failure(refusal):
            actions.append(.audit(Audit(actor: holder, action: "lease.unlock", target: deviceID, outcome: "refused", detail: refusal.description)))
        }
        return Decision(result: result, actions: actions)
    }

    /// The operator said goodbye: its session's leases are released at once.
    public mutating func endSession(_ sessionID: String) -> [Action] {
        guard !sessionID.isEmpty else { return [] }
        sessions.end(sessionID)
        return released(leases.releaseAll(inSession: sessionID), why: "session.end", detail: "the operator session ended")
    }

    /// Leases that ran out, and those of sessions that fell silent (the operator disconnected).
    public mutating func tick(now: UInt64) -> [Action] {
        var actions = released(leases.expire(now: now, sparing: Set(changing.keys)), why: "lease.expire", detail: "the lease ran out")
        for session in sessions.expire(now: now) {
            actions += released(
                leases.releaseAll(inSession: session), why: "session.lost",
                detail: "operator session \(session) went silent (disconnected)")
        }
        return actions
    }

    /// The operator `holder` is gone: their leases must not outlive them (a timed lease could
    /// otherwise keep a device locked for days by nobody), nor may they take new ones.
    public mutating func holderRemoved(_ holder: String, detail: String) -> [Action] {
        removedHolders.insert(holder)
        return released(leases.releaseAll(heldBy: holder), why: "lease.holder_removed", detail: detail)
    }

    /// An operator (again) on the roster may take leases.
    public mutating func holderAdmitted(_ holder: String) {
        removedHolders.remove(holder)
    }

    /// The store refused `action`. A lock or unlock someone waits on is undone (the device goes
    /// back to what it had, unless it changed since: then the later decision stands) and
    /// true says its requester must hear of the failure. A lease released by the coordinator
    /// stays released: the stored row brings it back only after a restart, until it runs out.
    public mutating func notStored(_ action: Action) -> Bool {
        switch action {
        case let .store(lease, _, previous, _):
            if leases.leases[lease.deviceID] == lease { leases.reinstate(lease.deviceID, previous) }
            return true
        case let .remove(lease, _, answered) where answered:
            if leases.leases[lease.deviceID] == nil { leases.reinstate(lease.deviceID, lease) }
            return true
        case .remove, .audit, .announce:
            return false
        }
    }

    private func released(_ gone: [Lease], why action: String, detail: String) -> [Action] {
        gone.flatMap { lease -> [Action] in
            [
                .remove(
                    lease,
                    Audit(
                        actor: "coordinator", action: action, target: lease.deviceID, outcome: "ok",
                        detail: "held by \(lease.holder): \(detail)"), answered: false),
                .announce(deviceID: lease.deviceID, message: "lease of \(lease.holder) released: \(detail)"),
            ]
        }
    }
}
