/// Rate limiting for alerts handed to an operator's command or webhook: at most one alert
/// per key (e.g. "node_offline node-7f3a") per interval, so a flapping node cannot flood
/// a pager; the alert that ends a quiet spell says how many were held back. Pure: the
/// caller passes time in (nanoseconds, any monotonic origin).
public struct AlertThrottle: Sendable, Equatable {
    public struct Decision: Equatable, Sendable {
        /// Deliver this alert now.
        public var deliver: Bool
        /// Alerts for the same key suppressed since the last one delivered.
        public var suppressedBefore: Int

        public init(deliver: Bool, suppressedBefore: Int) {
            self.deliver = deliver
            self.suppressedBefore = suppressedBefore
        }
    }

    public let interval: UInt64
    /// Across all keys, at most this many alerts per interval (a storm of distinct keys).
    public let burst: Int
    private var lastDelivered: [String: UInt64] = [:]
    private var suppressed: [String: Int] = [:]
    private var recent: [UInt64] = []

    public init(intervalNanoseconds: UInt64 = 60_000_000_000, burst: Int = 20) {
        interval = intervalNanoseconds
        self.burst = max(1, burst)
    }

    public mutating func consider(key: String, at now: UInt64) -> Decision {
        recent.removeAll { now >= $0 + interval }
        let quietEnough = lastDelivered[key].map { now >= $0 + interval } ?? true
        guard quietEnough, recent.count < burst else {
            suppressed[key, default: 0] += 1
            return Decision(deliver: false, suppressedBefore: 0)
        }
        lastDelivered[key] = now
        recent.append(now)
        return Decision(deliver: true, suppressedBefore: suppressed.removeValue(forKey: key) ?? 0)
    }
}
