import FleetCapture
import FleetCore
import FleetProtocol
import Synchronization

/// Steers a source's capture deadlines onto the fleet-time grid while its node's clock is
/// locked; until then, and for a lost lock, the source runs at its nominal period.
final class FleetGridScheduler: FrameScheduler {
    let clock: ClockSync
    let aligner: FrameAligner

    init(clock: ClockSync, aligner: FrameAligner) {
        self.clock = clock
        self.aligner = aligner
    }

    func nextDeadline(after previous: UInt64, period: UInt64) -> UInt64 {
        guard let estimate = clock.latest.estimate, estimate.state == .locked else { return previous &+ period }
        let node = clock.nodeClock
        let next = aligner.nextDeadline(after: node.local(fromMonotonic: previous), period: period, mapping: estimate.mapping)
        return node.monotonic(fromLocal: next)
    }
}

/// One device's alignment to the fleet-time grid: whether it is steered, and where its
/// latest frame fell (proto-docs/clock.md, "Frame alignment").
final class FrameAlignmentState: Sendable {
    private struct State {
        var aligner: FrameAligner?
        var steered = false
        var phase: Int64 = 0
        var locked = false
    }
    private let state = Mutex(State())
    /// Within this of its slot, a frame counts as aligned.
    static let alignedWithin: Int64 = 100_000

    func set(_ aligner: FrameAligner?, steered: Bool) {
        state.withLock { $0 = State(aligner: aligner, steered: steered) }
    }

    /// Called on the capture thread for each frame stamped in fleet time.
    func observe(fleetTime: UInt64, frameRate: Double, locked: Bool) {
        guard frameRate > 0, frameRate.isFinite else { return }
        let period = UInt64(1e9 / frameRate)
        state.withLock { state in
            guard let aligner = state.aligner else { return }
            state.phase = aligner.phase(ofFleetTime: fleetTime, period: period)
            state.locked = locked
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
            $0.state =
                !current.steered
                ? .unaligned
                : current.locked && abs(current.phase) <= Self.alignedWithin ? .aligned : .aligning
        }
    }
}
