import FleetCore
import FleetHost
import FleetProtocol
import FleetSystem
import Foundation
import Synchronization

/// Samples the host's pressure on a thread of its own (the reads are blocking file I/O),
/// reduces each sample to a level, keeps the latest report for the status, and tells the
/// agent at once when the level changes.
final class PressureMonitor: Sendable {
    struct Change: Sendable {
        let report: Capfleet_V1_PressureReport
        let previous: PressureLevel
        let current: PressureLevel
    }

    private let sampler: PressureSampler
    private let interval: Duration
    private let nodeID: String
    /// The agent's own load over the last interval: frames lost by reason, frames captured,
    /// and the send queue's fill.
    private let load: @Sendable () -> AgentLoad
    private let onChange: @Sendable (Change) -> Void
    /// Each report's time (`unix_ms`).
    private let wallClock: WallClock
    private let evaluator: Mutex<PressureEvaluator>
    private let latestReport = Mutex<Capfleet_V1_PressureReport?>(nil)
    private let sampling = Mutex<OwnedWorker<Never>?>(nil)

    init(
        sampler: PressureSampler, thresholds: PressureThresholds, interval: Duration, nodeID: String,
        load: @escaping @Sendable () -> AgentLoad, onChange: @escaping @Sendable (Change) -> Void, wallClock: WallClock = .system
    ) {
        self.wallClock = wallClock
        self.sampler = sampler
        self.interval = interval
        self.nodeID = nodeID
        self.load = load
        self.onChange = onChange
        evaluator = Mutex(PressureEvaluator(thresholds: thresholds))
    }

    var latest: Capfleet_V1_PressureReport? { latestReport.withLock { $0 } }
    var level: PressureLevel { evaluator.withLock { $0.assessment.level } }

    /// How ps and benchmarks (reading /proc/PID/task) find the sampler thread.
    static let threadName = "cf-pressure"

    /// Samples at once, then every interval, on the sampler's own thread.
    func start() {
        let nanoseconds = UInt64(interval.components.seconds) * 1_000_000_000 + UInt64(interval.components.attoseconds / 1_000_000_000)
        sampling.withLock { worker in
            guard worker == nil else { return }
            worker = OwnedWorker<Never>(
                name: Self.threadName, tickNanoseconds: nanoseconds,
                state: { [self] in sampleOnce() }, handle: { _, _ in }, onTick: { [self] _ in sampleOnce() })
        }
    }

    func stop() {
        sampling.withLock { $0 }?.stopBlocking()
    }

    /// One sample, evaluated; public to the module so tests and the first report need not wait.
    func sampleOnce() {
        var sample = sampler.sample()
        let own = load()
        sample.dropRate = own.dropRate
        sample.sendQueueFill = own.queueFill
        sample.detectionSkipRate = own.detection.skipRate
        sample.intervalDrops = own.drops
        sample.intervalFrames = own.frames
        let (previous, result) = evaluator.withLock { evaluator in
            let previous = evaluator.assessment.level
            return (previous, evaluator.evaluate(sample))
        }
        var report = result.assessment.wire(nodeID: nodeID, sample: sample, unixMilliseconds: wallClock.unixMilliseconds())
        if result.levelChanged { report.previousLevel = previous.wire }
        latestReport.withLock { $0 = report }
        if result.levelChanged { onChange(Change(report: report, previous: previous, current: result.assessment.level)) }
    }
}

/// What the agent itself contributes to pressure over one sampling interval.
struct AgentLoad: Sendable {
    var drops: DropTally
    var frames: UInt64
    var queueFill: Double
    /// Frames detection examined and skipped over the interval, all devices.
    var detection = DetectionTally()

    /// Frames lost / frames that should have been captured (lost + captured).
    var dropRate: Double {
        let lost = drops.total
        return lost + frames > 0 ? Double(lost) / Double(lost + frames) : 0
    }
}

/// Frames the agent's detectors examined, and due frames they skipped because they were busy.
struct DetectionTally: Sendable, Equatable {
    var examined: UInt64 = 0
    var skipped: UInt64 = 0

    /// The counts since `earlier` (a device re-created restarts its counts: nothing then).
    func since(_ earlier: DetectionTally) -> DetectionTally {
        guard examined >= earlier.examined, skipped >= earlier.skipped else { return DetectionTally() }
        return DetectionTally(examined: examined - earlier.examined, skipped: skipped - earlier.skipped)
    }

    /// Skipped / due; nil when no frame was due (no detection running: no factor).
    var skipRate: Double? {
        examined + skipped > 0 ? Double(skipped) / Double(examined + skipped) : nil
    }
}
