import FleetProtocol

/// What one agent status said of one camera of a take, as the take's sync report reads it:
/// the device's counters and alignment, and its node's clock at that report.
public struct TakeSyncSample: Sendable, Equatable {
    public var deviceID: String
    public var nodeID: String
    /// Cumulative in the agent process that sent it: they start again from 0 after a restart.
    public var framesCaptured: UInt64
    public var drops: DropTally
    public var frameRate: Double
    public var alignment: Capfleet_V1_FrameAlignment.State
    /// The latest frame's distance from its slot (only meaningful with a grid).
    public var phaseNs: Int64
    public var steered: Bool
    public var sync: Capfleet_V1_ClockState.Sync
    public var uncertaintyNs: UInt64
    public var takeQueuePeak: UInt32
    public var takeQueueCapacity: UInt32
    /// How its exposures are timed now, in words (`exposureTiming(of:)`).
    public var exposureTiming = ""

    public init(
        deviceID: String, nodeID: String, framesCaptured: UInt64 = 0, drops: DropTally = DropTally(), frameRate: Double = 30,
        alignment: Capfleet_V1_FrameAlignment.State = .aligned, phaseNs: Int64 = 0, steered: Bool = true,
        sync: Capfleet_V1_ClockState.Sync = .locked, uncertaintyNs: UInt64 = 0, takeQueuePeak: UInt32 = 0, takeQueueCapacity: UInt32 = 0
    ) {
        self.deviceID = deviceID
        self.nodeID = nodeID
        self.framesCaptured = framesCaptured
        self.drops = drops
        self.frameRate = frameRate
        self.alignment = alignment
        self.phaseNs = phaseNs
        self.steered = steered
        self.sync = sync
        self.uncertaintyNs = uncertaintyNs
        self.takeQueuePeak = takeQueuePeak
        self.takeQueueCapacity = takeQueueCapacity
    }

    /// A device's counters in its node's status, with the node's clock. A device that reports
    /// ALIGNING or ALIGNED is steering, whether or not its agent says `steered` (before 1.7).
    public init(_ counters: Capfleet_V1_DeviceCounters, nodeID: String, clock: Capfleet_V1_ClockState) {
        self.init(
            deviceID: counters.deviceID, nodeID: nodeID, framesCaptured: counters.framesCaptured, drops: DropTally(wire: counters.drops),
            frameRate: counters.activeFrameRate, alignment: counters.alignment.state, phaseNs: counters.alignment.phaseNs,
            steered: counters.alignment.steered || counters.alignment.state == .aligned || counters.alignment.state == .aligning,
            sync: clock.sync, uncertaintyNs: clock.uncertaintyNs, takeQueuePeak: counters.takeQueuePeak,
            takeQueueCapacity: counters.takeQueueCapacity)
        exposureTiming = Self.exposureTiming(of: counters.alignment)
    }

    /// How a device's exposures are timed, as its alignment report says, in the take report's words.
    public static func exposureTiming(of alignment: Capfleet_V1_FrameAlignment) -> String {
        guard alignment.state != .off, alignment.state != .unspecified else { return "free-running" }
        if alignment.triggered {
            switch alignment.triggerDelivery {
            case .hardwareLine:
                return
                    "\(alignment.triggerLine) from \(alignment.lineSourceDeviceID.isEmpty ? "an external generator" : alignment.lineSourceDeviceID)"
            case .scheduledAction: return "scheduled action commands"
            default: return "software triggers"
            }
        }
        return alignment.steered ? "steered" : "free-running"
    }

    /// Has a place on the grid: its phase means something.
    var hasGrid: Bool { alignment == .aligning || alignment == .aligned || alignment == .unaligned }
}

/// Worse first, for "the worst state seen".
extension Capfleet_V1_ClockState.Sync {
    var goodness: Int {
        switch self {
        case .locked: 3
        case .synchronising: 2
        case .unsynchronised: 1
        default: 0
        }
    }
}

extension Capfleet_V1_FrameAlignment.State {
    var goodness: Int {
        switch self {
        case .aligned: 4
        case .aligning: 3
        case .unaligned: 2
        case .off: 1
        default: 0
        }
    }
}
