/// Counts rejected input per endpoint and reason, and decides when a rejection is worth a
/// log line: once per peer and reason per minute, so a misbehaving peer cannot flood the log.
public struct RejectionLedger: Sendable {
    public struct Key: Hashable, Sendable, Comparable {
        public let endpoint: String
        public let reason: String

        public init(endpoint: String, reason: String) {
            self.endpoint = endpoint
            self.reason = reason
        }

        public static func < (a: Key, b: Key) -> Bool { (a.endpoint, a.reason) < (b.endpoint, b.reason) }
    }

    public let logIntervalNanoseconds: UInt64
    public private(set) var counts: [Key: UInt64] = [:]
    private var lastLogged: [String: UInt64] = [:]

    public init(logIntervalNanoseconds: UInt64 = 60_000_000_000) {
        self.logIntervalNanoseconds = logIntervalNanoseconds
    }

    /// Records one rejection; returns true when the caller should log it.
    public mutating func record(endpoint: String, reason: String, peer: String, at now: UInt64) -> Bool {
        counts[Key(endpoint: endpoint, reason: reason), default: 0] += 1
        let logKey = "\(endpoint)|\(reason)|\(peer)"
        if let last = lastLogged[logKey], now >= last, now - last < logIntervalNanoseconds { return false }
        lastLogged[logKey] = now
        if lastLogged.count > 10_000 { lastLogged = lastLogged.filter { now - $0.value < logIntervalNanoseconds } }
        return true
    }

    /// Counts kept from before this process (the fleet database's): counting goes on from them.
    public mutating func resume(from stored: [(endpoint: String, reason: String, count: UInt64)]) {
        for entry in stored {
            let key = Key(endpoint: entry.endpoint, reason: entry.reason)
            counts[key] = (counts[key] ?? 0).addingSaturated(entry.count)
        }
    }

    public func count(endpoint: String, reason: String) -> UInt64 {
        counts[Key(endpoint: endpoint, reason: reason)] ?? 0
    }
}
