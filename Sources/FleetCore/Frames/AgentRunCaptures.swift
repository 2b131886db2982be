/// Frames and payload bytes a device captured, as an agent process counts them.
public struct CaptureTally: Sendable, Equatable {
    public var frames: UInt64
    public var bytes: UInt64

    public init(frames: UInt64 = 0, bytes: UInt64 = 0) {
        self.frames = frames
        self.bytes = bytes
    }

    public func adding(_ other: CaptureTally) -> CaptureTally {
        CaptureTally(frames: frames &+ other.frames, bytes: bytes &+ other.bytes)
    }
}

/// A device's captured frames as the coordinator adds them up from its agent's status reports,
/// whether or not the frames crossed the network (frames.md, "Live frames on demand"). Like
/// drops (`AgentRunDrops`), an agent counts from 0 in each process it runs: a new
/// `agent_instance` starts a new run, and the runs before it are kept aside.
///
/// The current run's counts are stored with the total, so a coordinator that restarts while
/// the same agent process goes on neither loses nor counts twice what that process reported.
public struct AgentRunCaptures: Sendable, Equatable {
    /// The agent process the current run's counts come from.
    public private(set) var agentInstance: String
    /// Everything the device's earlier agent processes captured.
    public private(set) var earlierRuns: CaptureTally
    /// The current process's cumulative counts, the largest reported (reports can cross).
    public private(set) var currentRun: CaptureTally

    public init(agentInstance: String = "", earlierRuns: CaptureTally = CaptureTally(), currentRun: CaptureTally = CaptureTally()) {
        self.agentInstance = agentInstance
        self.earlierRuns = earlierRuns
        self.currentRun = currentRun
    }

    public var total: CaptureTally { earlierRuns.adding(currentRun) }

    /// A cumulative report from the current run.
    public mutating func report(_ cumulative: CaptureTally) {
        currentRun = CaptureTally(frames: max(currentRun.frames, cumulative.frames), bytes: max(currentRun.bytes, cumulative.bytes))
    }

    /// The device's node registered from `instance`: a different process than the one counted
    /// starts a new run.
    public mutating func registered(agentInstance instance: String) {
        defer { agentInstance = instance }
        guard instance != agentInstance else { return }
        earlierRuns = total
        currentRun = CaptureTally()
    }
}
