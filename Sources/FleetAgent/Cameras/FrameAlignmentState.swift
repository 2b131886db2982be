import FleetCapture
import FleetCore
import FleetProtocol
import Synchronization

/// One device's alignment to the fleet-time grid (proto-docs/clock.md, "Frame alignment"):
/// where its latest frame's exposure began against its slot, and, for a source whose frame
/// length can be set, the phase loop that steers it there (`FramePhaseLoop`), fed each
/// frame's start of exposure in fleet time while the node's clock is locked.
final class FrameAlignmentState: Sendable {
    private struct State {
        var aligner: FrameAligner?
        /// The source can set its frame length: the loop steers it.
        var steerable = false
        var loop: FramePhaseLoop?
        /// The timing the loop was made for: a change of rate or format makes another.
        var timing: FrameLengthTiming?
        var phase: Int64 = 0
        var clockLocked = false
    }
    private let state = Mutex(State())
    /// Within this of its slot, a frame counts as aligned (the loop's lock tolerance too).
    static let alignedWithin: Int64 = 100_000

    func set(_ aligner: FrameAligner?, steerable: Bool) {
        state.withLock { $0 = State(aligner: aligner, steerable: steerable) }
    }

    /// Called on the capture thread for each frame stamped in fleet time; the frame length
    /// (lines) to set from the next frame on while the source is steered, else nil.
    func observe(sequence: UInt64, fleetTime: UInt64, frameRate: Double, clockLocked: Bool, timing: FrameLengthTiming?) -> Int? {
        guard frameRate > 0, frameRate.isFinite else { return nil }
        let period = UInt64(1e9 / frameRate)
        return state.withLock { state in
            guard let aligner = state.aligner else { return nil }
            state.phase = aligner.phase(ofFleetTime: fleetTime, period: period)
            state.clockLocked = clockLocked
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
                return
            }
            $0.gridOriginFleetNs = aligner.origin
            $0.phaseNs = current.phase
            let locked = current.loop?.state == .locked
            $0.state =
                !current.steerable || current.loop.map({ if case .unsteerable = $0.state { true } else { false } }) == true
                ? .unaligned
                : current.clockLocked && locked && abs(current.phase) <= Self.alignedWithin ? .aligned : .aligning
        }
    }
}
