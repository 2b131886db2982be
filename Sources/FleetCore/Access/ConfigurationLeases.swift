/// Exclusive, expiring rights to configure a device — the fleet's "lock for
/// configuration". An operator takes a lease before changing a device; a change without it
/// is refused naming who holds it. Pure state: the caller passes time in, persists and
/// audits what comes out.
public struct ConfigurationLeases: Sendable, Equatable {
    public struct Lease: Sendable, Equatable, Hashable {
        public let deviceID: String
        public let holder: String
        public let expiresAt: UInt64
        /// The operator session holding it; nil for a plain timed lease.
        public let sessionID: String?

        public init(deviceID: String, holder: String, expiresAt: UInt64, sessionID: String? = nil) {
            self.deviceID = deviceID
            self.holder = holder
            self.expiresAt = expiresAt
            self.sessionID = sessionID
        }
    }

    public enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        case heldByAnother(Lease)
        case notHeld(deviceID: String)
        /// The operator was removed while their request was on its way.
        case holderRemoved(String)

        public var description: String {
            switch self {
            case let .heldByAnother(lease):
                "device \(lease.deviceID) is locked for configuration by \(lease.holder); ask them to unlock it, or wait for the lease to expire"
            case let .notHeld(deviceID):
                "device \(deviceID) is not locked for configuration by you: lock it first (capfleet lock \(deviceID))"
            case let .holderRemoved(holder):
                "operator \(holder) was removed from the fleet and may not lock devices"
            }
        }
    }

    public private(set) var leases: [String: Lease] = [:]

    public init() {}

    /// Takes or renews the lease on `deviceID` for `duration` nanoseconds.
    /// Taken within a session, it also ends when the session does.
    public mutating func acquire(
        _ deviceID: String, by holder: String, for duration: UInt64, now: UInt64,
        session sessionID: String? = nil
    ) -> Result<Lease, Refusal> {
        if let current = active(deviceID, now: now), current.holder != holder { return .failure(.heldByAnother(current)) }
        let lease = Lease(deviceID: deviceID, holder: holder, expiresAt: now + duration, sessionID: sessionID)
        leases[deviceID] = lease
        return .success(lease)
    }

    /// Gives a lease back; only its holder may.
    public mutating func release(_ deviceID: String, by holder: String, now: UInt64) -> Result<Lease, Refusal> {
        guard let current = active(deviceID, now: now) else { return .failure(.notHeld(deviceID: deviceID)) }
        guard current.holder == holder else { return .failure(.heldByAnother(current)) }
        leases[deviceID] = nil
        return .success(current)
    }

    /// Whether `holder` may change `deviceID` now.
    public func authorize(_ deviceID: String, by holder: String, now: UInt64) -> Result<Lease, Refusal> {
        guard let current = active(deviceID, now: now) else { return .failure(.notHeld(deviceID: deviceID)) }
        return current.holder == holder ? .success(current) : .failure(.heldByAnother(current))
    }

    /// Removes and returns leases that ran out, for the audit log; those of `sparing` stay
    /// (a change made under them is still on its way).
    public mutating func expire(now: UInt64, sparing: Set<String> = []) -> [Lease] {
        let expired = leases.values.filter { $0.expiresAt <= now && !sparing.contains($0.deviceID) }.sorted { $0.deviceID < $1.deviceID }
        for lease in expired { leases[lease.deviceID] = nil }
        return expired
    }

    /// An operator session ended or went silent: everything it held is released.
    public mutating func releaseAll(inSession sessionID: String) -> [Lease] {
        let held = leases.values.filter { $0.sessionID == sessionID }.sorted { $0.deviceID < $1.deviceID }
        for lease in held { leases[lease.deviceID] = nil }
        return held
    }

    /// An operator was removed (or lost their key): every lease they hold goes, timed or not.
    public mutating func releaseAll(heldBy holder: String) -> [Lease] {
        let held = leases.values.filter { $0.holder == holder }.sorted { $0.deviceID < $1.deviceID }
        for lease in held { leases[lease.deviceID] = nil }
        return held
    }

    /// Puts back what a device's lease was, for a lease the store refused to record.
    public mutating func reinstate(_ deviceID: String, _ lease: Lease?) {
        leases[deviceID] = lease
    }

    private func active(_ deviceID: String, now: UInt64) -> Lease? {
        guard let lease = leases[deviceID], lease.expiresAt > now else { return nil }
        return lease
    }
}

/// Operator sessions: a CLI that holds a lease interactively (`capfleet lock --hold`) sends
/// requests at least every few seconds; when it says goodbye, or falls silent for its
/// timeout (killed, unplugged, network gone), the session is over and its leases go.
public struct OperatorSessions: Sendable, Equatable {
    private var lastSeen: [String: (at: UInt64, timeout: UInt64)] = [:]

    public init() {}

    public static func == (lhs: OperatorSessions, rhs: OperatorSessions) -> Bool {
        lhs.lastSeen.mapValues { [$0.at, $0.timeout] } == rhs.lastSeen.mapValues { [$0.at, $0.timeout] }
    }

    public mutating func heard(_ sessionID: String, timeout: UInt64, now: UInt64) {
        lastSeen[sessionID] = (now, timeout)
    }

    public mutating func end(_ sessionID: String) {
        lastSeen[sessionID] = nil
    }

    public func isActive(_ sessionID: String) -> Bool { lastSeen[sessionID] != nil }

    /// Sessions silent for longer than their timeout, removed.
    public mutating func expire(now: UInt64) -> [String] {
        let silent = lastSeen.filter { now >= $0.value.at + $0.value.timeout }.map(\.key).sorted()
        for session in silent { lastSeen[session] = nil }
        return silent
    }
}
