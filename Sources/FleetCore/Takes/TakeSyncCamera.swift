import FleetProtocol

/// One camera's figures over a take, put together from its agent's status reports (about one
/// a second). Memory stays the same however long the take runs: the phases go into a
/// `MagnitudeHistogram`, everything else is a running figure.
///
/// Each report stands for the time since the one before it (or since the take's start):
/// a report out of phase or with the clock not locked counts that whole interval against the
/// camera. Counters are cumulative per agent process; a report whose frame count went down
/// comes from a new process, whose counts are all new.
public struct TakeSyncCamera: Sendable, Equatable {
    public let deviceID: String
    public private(set) var nodeID: String
    public private(set) var reports: UInt32 = 0
    public private(set) var worstSync: Capfleet_V1_ClockState.Sync = .locked
    /// Time the node's clock was not locked, and the worst state it was in then.
    public private(set) var notLockedNs: UInt64 = 0
    public private(set) var maxUncertaintyNs: UInt64 = 0
    public private(set) var steeredThroughout = true
    /// How its exposures were timed during the take, each change kept (the last four).
    public private(set) var exposureTimings: [String] = []
    public var exposureTiming: String { exposureTimings.joined(separator: ", then ") }
    public private(set) var worstAlignment: Capfleet_V1_FrameAlignment.State = .aligned
    public private(set) var phases = MagnitudeHistogram()
    /// Time in reports not ALIGNED.
    public private(set) var outOfPhaseNs: UInt64 = 0
    private var captured: Double = 0
    private var expected: Double = 0
    public private(set) var drops = DropTally()
    /// The fullest its take's write queue got (peak / capacity); nil until a report gave a capacity.
    public private(set) var fullestQueue: Double?
    /// The latest report's phase on the grid, and when (for the spread across cameras).
    public private(set) var latestPhase: (phaseNs: Int64, frameRate: Double, at: UInt64)?
    /// The previous report's counters and time: what the next report's deltas are taken from.
    private var previous: (at: UInt64, frames: UInt64, drops: DropTally)?

    public init(deviceID: String, nodeID: String) {
        self.deviceID = deviceID
        self.nodeID = nodeID
    }

    /// Frames captured and expected in the take: between two statuses on either side of its
    /// start or stop, the share of that interval inside the take.
    public var framesCaptured: UInt64 { UInt64(captured.rounded()) }
    public var framesExpected: UInt64 { UInt64(expected.rounded()) }
    /// 1 − the fullest the write queue got: 0 means it filled. nil: never reported.
    public var writerHeadroom: Double? { fullestQueue.map { Swift.max(0, 1 - $0) } }

    public static func == (lhs: TakeSyncCamera, rhs: TakeSyncCamera) -> Bool {
        lhs.deviceID == rhs.deviceID && lhs.reports == rhs.reports && lhs.framesCaptured == rhs.framesCaptured && lhs.drops == rhs.drops
            && lhs.phases == rhs.phases && lhs.outOfPhaseNs == rhs.outOfPhaseNs && lhs.notLockedNs == rhs.notLockedNs
    }

    /// A report from before the take's start: only where the counters stand.
    mutating func baseline(_ sample: TakeSyncSample, at: UInt64) {
        previous = (at, sample.framesCaptured, sample.drops)
    }

    /// A report during the take (`take`: its start and stop, or the start and now), standing
    /// for `interval` ns of it.
    mutating func observe(_ sample: TakeSyncSample, at: UInt64, interval: UInt64, take: ClosedRange<UInt64>) {
        nodeID = sample.nodeID
        reports += 1
        if sample.sync.goodness < worstSync.goodness { worstSync = sample.sync }
        if sample.sync != .locked { notLockedNs = notLockedNs.addingSaturated(interval) }
        maxUncertaintyNs = Swift.max(maxUncertaintyNs, sample.uncertaintyNs)
        if !sample.steered { steeredThroughout = false }
        if !sample.exposureTiming.isEmpty, exposureTimings.last != sample.exposureTiming {
            exposureTimings.append(sample.exposureTiming)
            if exposureTimings.count > 4 { exposureTimings.removeFirst() }
        }
        if sample.alignment.goodness < worstAlignment.goodness { worstAlignment = sample.alignment }
        if sample.alignment != .aligned { outOfPhaseNs = outOfPhaseNs.addingSaturated(interval) }
        if sample.hasGrid {
            phases.add(sample.phaseNs.magnitude)
            latestPhase = (sample.phaseNs, sample.frameRate, at)
        } else {
            latestPhase = nil
        }
        if sample.takeQueueCapacity > 0 {
            let fill = Double(sample.takeQueuePeak) / Double(sample.takeQueueCapacity)
            fullestQueue = Swift.max(fullestQueue ?? 0, fill)
        }
        count(sample, at: at, take: take)
    }

    /// The first report after the take's stop: its counters close the take's counts, and
    /// its states stand for the time from the last report to the stop.
    mutating func close(_ sample: TakeSyncSample, at: UInt64, interval: UInt64, take: ClosedRange<UInt64>) {
        if sample.sync != .locked {
            notLockedNs = notLockedNs.addingSaturated(interval)
            if sample.sync.goodness < worstSync.goodness { worstSync = sample.sync }
        }
        if sample.alignment != .aligned { outOfPhaseNs = outOfPhaseNs.addingSaturated(interval) }
        count(sample, at: at, take: take)
    }

    /// The counters' growth since the previous status. Frames count for the share of the
    /// interval inside the take; drops count whole, so that none in the take is missed.
    private mutating func count(_ sample: TakeSyncSample, at: UInt64, take: ClosedRange<UInt64>) {
        defer { previous = (at, sample.framesCaptured, sample.drops) }
        guard let previous, at > previous.at else { return }
        let inside = Double(Swift.min(at, take.upperBound)) - Double(Swift.max(previous.at, take.lowerBound))
        let share = Swift.min(Swift.max(inside / Double(at - previous.at), 0), 1)
        if sample.framesCaptured < previous.frames {
            // A new agent process: everything it counted is new.
            captured += Double(sample.framesCaptured) * share
            drops = drops.adding(sample.drops)
        } else {
            captured += Double(sample.framesCaptured - previous.frames) * share
            drops = drops.adding(sample.drops.since(previous.drops))
        }
        if sample.frameRate > 0 { expected += Double(at - previous.at) / 1e9 * sample.frameRate * share }
    }
}
