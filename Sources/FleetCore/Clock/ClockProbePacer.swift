/// How often a locked agent should probe the coordinator's clock, so that the whole fleet's
/// probes stay within what the coordinator is to spend on them. Every probe round trip wakes
/// the coordinator's threads twice; at a fixed pace per agent a fleet of hundreds spends most
/// of the coordinator's messages (and a good share of a core) on clock probes alone. The
/// pacer counts the agents probing (distinct connections heard in the last `memory`) and
/// spreads the budget over them: small fleets keep the fastest pace, large ones probe less
/// often each (their window spans longer, their drift is known as well). Pure.
public struct ClockProbePacer: Sendable {
    /// Round trips a second the coordinator answers from locked agents.
    public let budget: Double
    /// A probe pair (wake, then measure: two round trips) at most this often per agent.
    public static let fastest: UInt64 = 100_000_000
    /// And at least this often: four times within an estimate's staleness (10 s).
    public static let slowest: UInt64 = 2_500_000_000
    /// An agent not heard for this long no longer counts.
    public static let memory: UInt64 = 10_000_000_000
    private var lastHeard: [[UInt8]: UInt64] = [:]
    private var nextPrune: UInt64 = 0

    public init(budget: Double) { self.budget = max(budget, 1) }

    /// The agents probing now.
    public var agents: Int { lastHeard.count }

    /// A probe from `peer` (its connection's routing id) at `now`: the locked pace, in ns,
    /// its answer suggests.
    public mutating func heard(from peer: [UInt8], at now: UInt64) -> UInt64 {
        lastHeard[peer] = now
        if now >= nextPrune {
            nextPrune = now + 1_000_000_000
            lastHeard = lastHeard.filter { now &- $0.value <= Self.memory }
        }
        return interval
    }

    /// Each agent's pair of round trips, spread so that all of them together stay within the budget.
    public var interval: UInt64 { interval(forAgents: lastHeard.count) }

    public func interval(forAgents agents: Int) -> UInt64 {
        let spread = Double(2 * agents) / budget * 1e9
        return min(max(Self.fastest, UInt64(spread.rounded(.up))), Self.slowest)
    }
}
