/// A device's drops as the coordinator adds them up from its agent's reports. An agent counts
/// drops (and numbers frames) from 0 in each process it runs; a new process says so with a new
/// `agent_instance` in its HELLO. Its counts then start over: that is a restart, not a gap and
/// not a loss, so the runs before it are kept aside and added to the new run's counts.
public struct AgentRunDrops: Sendable, Equatable {
    /// The agent process the current run's counts come from; empty until the first HELLO
    /// that names one (agents before protocol 1.1 do not).
    public private(set) var agentInstance = ""
    /// Everything the device's earlier agent processes counted.
    public private(set) var earlierRuns = DropTally()
    /// The current process's cumulative counts, the largest reported (reports can cross).
    public private(set) var currentRun = DropTally()
    /// How many times the device's agent process started over while this coordinator ran.
    public private(set) var restarts: UInt64 = 0

    public init() {}

    public var total: DropTally { earlierRuns.adding(currentRun) }

    /// A cumulative report from the current run (a frame header or the agent's status).
    public mutating func report(_ cumulative: DropTally) {
        currentRun = currentRun.merging(cumulative)
    }

    /// The device's node registered from `instance`. True when that is a new agent process of
    /// a device already counted: its counts and sequence numbers start over from here.
    public mutating func registered(agentInstance instance: String) -> Bool {
        defer { agentInstance = instance }
        guard !agentInstance.isEmpty, !instance.isEmpty, instance != agentInstance else { return false }
        earlierRuns = total
        currentRun = DropTally()
        restarts += 1
        return true
    }
}
