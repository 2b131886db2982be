import FleetCapture
import FleetCore
import FleetProtocol
import Foundation
import Synchronization

/// One device's alignment to the fleet-time grid (proto-docs/clock.md, "Frame alignment"):
/// where its frames' exposures began against their slots over the last minute, and, for a
/// source whose frame length can be set, the phase loop that steers it there
/// (`FramePhaseLoop`), fed each frame's start of exposure in fleet time while the node's
/// clock is locked.
final class FrameAlignmentState: Sendable {
    private struct State {
        var aligner: FrameAligner?
        /// The source can set its frame length: the loop steers it.
        var steerable = false
        /// Why it cannot, as the source says.
        var unsteerableReason = ""
        var loop: FramePhaseLoop?
        /// The timing the loop was made for: a change of rate or format makes another.
        var timing: FrameLengthTiming?
        var phase: Int64 = 0
        var clockLocked = false
        var window = PhaseWindow()
        /// The latest frame's fleet time: what the window's figures are as of.
        var latest: UInt64 = 0
        /// A free-running source's starts: how far after STREAMON its frames fall. Kept
        /// across grids (learnt from whatever started the stream).
        var freeRun = FreeRunStart()
        /// The stream start `freeRun` learns from.
        var freeRunStream: UInt64 = 0
        /// What became of starting the stream on the grid (free-running sources only).
        var gridStart: GridStart?
        /// A triggered camera: the agent fires each exposure at its slot.
        var triggered = false
        /// How late each trigger left after its slot's instant, over the window.
        var lateness = PhaseWindow()
        var latestLateness: UInt64?
        var triggersFired: UInt64 = 0
        var triggersMissed: UInt64 = 0
        var triggerError = ""
        /// How the triggers reach the camera, as trigger mode was last set.
        var delivery = TriggerDelivery.software(actionUnavailable: "")
        /// The output line it drives with its exposure signal, if any.
        var outputLine = ""
    }

    /// A free-running source's stream started again on a slot of the grid, or why it was not.
    enum GridStart: Sendable {
        case started(atFleet: UInt64)
        case notStarted(String)
    }
    private let state = Mutex(State())
    /// Within this of its slot, a frame counts as aligned (the loop's lock tolerance too).
    static let alignedWithin: Int64 = 100_000

    /// A grid to keep to (nil: alignment off); `unsteerableReason`: why a source that cannot be
    /// steered cannot, in its own words.
    func set(_ aligner: FrameAligner?, steerable: Bool, unsteerableReason: String = "", triggered: Bool = false) {
        state.withLock {
            var fresh = State(aligner: aligner, steerable: steerable, unsteerableReason: unsteerableReason, triggered: triggered)
            (fresh.freeRun, fresh.freeRunStream) = ($0.freeRun, $0.freeRunStream)
            // A new grid for a camera already triggered: its triggers reach it as before.
            if triggered, $0.triggered { fresh.delivery = $0.delivery }
            $0 = fresh
        }
    }

    /// The instant (monotonic ns) to start a free-running stream so that its frames fall on
    /// the grid's slots, at least `margin` after `nowMonotonic` (when fleet time read
    /// `nowFleet`); nil with no grid, or no start measured yet at `period`.
    func gridStartInstant(nowMonotonic: UInt64, nowFleet: UInt64, period: UInt64, margin: UInt64) -> UInt64? {
        state.withLock { state in
            guard let aligner = state.aligner, period > 0 else { return nil }
            // Any slot will do: only the instant modulo the period matters.
            let sincePhase = UInt64(aligner.phase(ofFleetTime: nowFleet, period: period) + Int64(period)) % period
            let slotMonotonic = nowMonotonic + period - sincePhase
            return state.freeRun.instant(earliest: nowMonotonic + margin, slotMonotonic: slotMonotonic, period: period)
        }
    }

    func noteGridStart(_ outcome: GridStart) { state.withLock { $0.gridStart = outcome } }

    // MARK: Triggers (the trigger thread)

    /// A trigger left `lateness` ns after the instant of its slot at `slotFleet`.
    func triggerFired(slotFleet: UInt64, lateness: UInt64, interval: UInt64) {
        state.withLock {
            $0.lateness.record(phase: Int64(clamping: lateness), at: slotFleet, interval: interval)
            $0.latestLateness = lateness
            $0.triggersFired += 1
            $0.triggerError = ""
        }
    }

    /// A slot passed without its trigger; `error` when the camera refused it.
    func triggerMissed(error: String? = nil) {
        state.withLock {
            $0.triggersMissed += 1
            if let error { $0.triggerError = error }
        }
    }

    /// Trigger mode was set with triggers reaching the camera this way.
    func triggerModeSet(_ delivery: TriggerDelivery) { state.withLock { $0.delivery = delivery } }

    /// It drives `line` with its exposure signal now (empty: none).
    func outputLineSet(_ line: String) { state.withLock { $0.outputLine = line } }

    /// Trigger mode could not be set: the camera free-runs, and the report says why.
    func triggerModeFailed(_ error: String) { state.withLock { $0.triggerError = error } }

    /// Called on the capture thread for each frame stamped in fleet time; the frame length
    /// (lines) to set from the next frame on while the source is steered, else nil.
    /// `captureMonotonic` and `streamStart` (the source's STREAMON, 0 when it cannot tell)
    /// teach a free-running source's start offset.
    func observe(
        sequence: UInt64, fleetTime: UInt64, frameRate: Double, clockLocked: Bool, timing: FrameLengthTiming?,
        captureMonotonic: UInt64 = 0, streamStart: UInt64 = 0
    ) -> Int? {
        guard frameRate > 0, frameRate.isFinite else { return nil }
        let period = UInt64(1e9 / frameRate)
        return state.withLock { state in
            if timing == nil, streamStart != 0 {
                if streamStart != state.freeRunStream {
                    state.freeRunStream = streamStart
                    state.freeRun.started(atMonotonic: streamStart, period: period)
                }
                if state.freeRun.isLearning { state.freeRun.frameCaptured(atMonotonic: captureMonotonic) }
            }
            guard let aligner = state.aligner else { return nil }
            state.phase = aligner.phase(ofFleetTime: fleetTime, period: period)
            state.clockLocked = clockLocked
            state.latest = fleetTime
            // Phases measured on a clock that is not locked say little of the exposures.
            if clockLocked { state.window.record(phase: state.phase, at: fleetTime, interval: period) }
            // Fleet times from a clock that is not locked would steer it anywhere: the sensor
            // keeps its last length until the clock is back.
            guard state.steerable, clockLocked, let timing else { return nil }
            if state.loop == nil || state.timing != timing {
                var configuration = FramePhaseLoop.Configuration(
                    nominalLineTime: timing.nominalLineTime, frameLengthRange: timing.frameLengthRange)
                configuration.lockTolerance = UInt64(Self.alignedWithin)
                state.loop = FramePhaseLoop(configuration: configuration, currentFrameLength: timing.nominalFrameLength)
                state.timing = timing
            }
            let command = state.loop!.observe(
                .init(sequence: sequence, exposureStart: fleetTime), on: FrameGrid(origin: aligner.origin, interval: period))
            return command.frameLengthLines
        }
    }

    var wire: Capfleet_V1_FrameAlignment {
        let current = state.withLock { $0 }
        return .with {
            guard let aligner = current.aligner else {
                $0.state = .off
                $0.notAlignedReason = "alignment is off: `capfleet align DEVICE` puts it on the fleet's grid"
                return
            }
            $0.gridOriginFleetNs = aligner.origin
            $0.phaseNs = current.phase
            $0.steered = current.steerable
            let (state, reason) = Self.judge(current)
            $0.state = state
            $0.notAlignedReason = reason
            let statistics = current.window.statistics(asOf: current.latest)
            $0.phaseMedianNs = statistics.median
            $0.phaseP99Ns = statistics.p99
            $0.phaseMaxNs = statistics.maximum
            $0.phaseFrames = UInt32(clamping: statistics.frames)
            $0.driftNsPerS = current.window.drift(asOf: current.latest) ?? 0
            if current.triggered {
                $0.triggered = true
                let lateness = current.lateness.statistics(asOf: current.latest)
                $0.triggerLatenessMedianNs = lateness.median
                $0.triggerLatenessP99Ns = lateness.p99
                $0.triggerLatenessMaxNs = lateness.maximum
                $0.triggersFired = current.triggersFired
                $0.triggersMissed = current.triggersMissed
                $0.triggerError = current.triggerError
                switch current.delivery {
                case let .software(actionUnavailable):
                    $0.triggerDelivery = .software
                    $0.actionUnavailableReason = actionUnavailable
                case .scheduledAction:
                    $0.triggerDelivery = .scheduledAction
                case let .hardwareLine(line, source):
                    $0.triggerDelivery = .hardwareLine
                    $0.triggerLine = line
                    $0.lineSourceDeviceID = source
                }
            }
            $0.outputLine = current.outputLine
            if let loop = current.loop {
                $0.frequencyErrorPpm = loop.frequencyErrorPPM
                if let spell = loop.lastOutOfPhase {
                    $0.outOfPhaseNs = spell.duration
                    $0.outOfPhaseEndFleetNs = spell.end
                }
                if let since = loop.outOfPhaseSince { $0.outOfPhaseSinceFleetNs = since.time }
            }
        }
    }

    /// The state to report, and why it is not ALIGNED in words an operator can act on.
    private static func judge(_ current: State) -> (Capfleet_V1_FrameAlignment.State, String) {
        if current.triggered { return judgeTriggered(current) }
        guard current.steerable else {
            let reason = current.unsteerableReason.isEmpty ? "free-running: the source cannot set its frame length" : current.unsteerableReason
            let start =
                switch current.gridStart {
                case let .started(atFleet)?:
                    "; its stream was started again on a slot of the grid at fleet time \(atFleet) ns, and drifts from there at its own rate"
                case let .notStarted(why)?: "; its stream was not started on the grid: \(why)"
                case nil: ""
                }
            return (.unaligned, reason + "; its phase is reported, not steered" + start)
        }
        guard current.clockLocked else {
            return (.aligning, "waiting for the node's clock to lock: a clock not locked would steer the sensor anywhere")
        }
        guard let loop = current.loop else { return (.aligning, "no frame measured yet") }
        switch loop.state {
        case let .unsteerable(needed, range):
            return (
                .unaligned,
                "the grid's rate needs \(Int(needed.rounded())) lines a frame, outside the \(range.lowerBound)...\(range.upperBound) the sensor's blanking allows: set a frame rate the format reaches"
            )
        case .locking:
            return (.aligning, "bringing the phase in: the latest frame was \(Self.duration(current.phase)) from its slot")
        case .locked:
            guard abs(current.phase) <= alignedWithin else {
                return (.aligning, "in lock, but the latest frame was \(Self.duration(current.phase)) from its slot")
            }
            return (.aligned, "")
        }
    }

    /// A triggered camera is aligned while its triggers leave on time: where its frames then
    /// fall is the camera's own trigger latency, which the phase figures show.
    private static func judgeTriggered(_ current: State) -> (Capfleet_V1_FrameAlignment.State, String) {
        if !current.triggerError.isEmpty, current.latestLateness == nil {
            return (.unaligned, "the camera would not be triggered: \(current.triggerError)")
        }
        if case let .hardwareLine(line, source) = current.delivery {
            // Its exposures are the line's: aligned while they fall on the grid's slots.
            guard !source.isEmpty else {
                return (
                    .unaligned,
                    "it exposes on the edges of \(line), driven by an external generator on a timebase of its own: its phase is reported, not steered"
                )
            }
            guard current.window.statistics(asOf: current.latest).frames > 0 else { return (.aligning, "no frame from \(line)'s edges yet") }
            guard abs(current.phase) <= alignedWithin else {
                return (
                    .aligning,
                    "it exposes on the edges of \(line), driven by \(source): the latest frame was \(duration(current.phase)) from its slot"
                )
            }
            return (.aligned, "")
        }
        guard current.clockLocked || current.latestLateness == nil else {
            return (.aligning, "waiting for the node's clock to lock: triggers wait for it, since an unlocked clock puts them anywhere")
        }
        guard let latest = current.latestLateness else {
            return (.aligning, "no trigger fired yet (the node's clock must be locked)")
        }
        if case let .scheduledAction(lead) = current.delivery {
            // The command carries its slot's time: it is on time if it arrives before it.
            guard latest &+ GridTriggerSchedule.actionMinimumAhead <= lead else {
                return (
                    .aligning,
                    "the latest action command left \(duration(Int64(clamping: latest))) after its planned departure, \(duration(Int64(clamping: lead))) ahead of its slot"
                )
            }
            return (.aligned, "")
        }
        guard latest <= UInt64(alignedWithin) else {
            return (.aligning, "the latest trigger left \(duration(Int64(clamping: latest))) after its slot")
        }
        return (.aligned, "")
    }

    private static func duration(_ nanoseconds: Int64) -> String {
        let magnitude = Double(nanoseconds.magnitude)
        let sign = nanoseconds < 0 ? "-" : "+"
        return magnitude >= 1e6 ? sign + String(format: "%.2f ms", magnitude / 1e6) : sign + String(format: "%.1f µs", magnitude / 1e3)
    }
}
