import FleetCore
import FleetHost
import FleetProtocol
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
    private let evaluator: Mutex<PressureEvaluator>
    private let latestReport = Mutex<Capfleet_V1_PressureReport?>(nil)
    private let running = Atomic<Bool>(false)
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    init(sampler: PressureSampler, thresholds: PressureThresholds, interval: Duration, nodeID: String,
         load: @escaping @Sendable () -> AgentLoad, onChange: @escaping @Sendable (Change) -> Void) {
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

    func start() {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let thread = Thread { [self] in
            ThreadName.set(Self.threadName)
            while running.load(ordering: .acquiring) {
                sampleOnce()
                let milliseconds = Int(interval.components.seconds * 1000 + interval.components.attoseconds / 1_000_000_000_000_000)
                _ = wake.wait(timeout: .now() + .milliseconds(milliseconds))
            }
            finished.signal()
        }
        thread.start()
    }

    func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        wake.signal()
        finished.wait()
    }

    /// One sample, evaluated; public to the module so tests and the first report need not wait.
    func sampleOnce() {
        var sample = sampler.sample()
        let own = load()
        sample.dropRate = own.dropRate
        sample.sendQueueFill = own.queueFill
        sample.intervalDrops = own.drops
        sample.intervalFrames = own.frames
        let (previous, result) = evaluator.withLock { evaluator in
            let previous = evaluator.assessment.level
            return (previous, evaluator.evaluate(sample))
        }
        var report = result.assessment.wire(nodeID: nodeID, sample: sample, unixMilliseconds: Int64(Date().timeIntervalSince1970 * 1000))
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

    /// Frames lost / frames that should have been captured (lost + captured).
    var dropRate: Double {
        let lost = drops.total
        return lost + frames > 0 ? Double(lost) / Double(lost + frames) : 0
    }
}
