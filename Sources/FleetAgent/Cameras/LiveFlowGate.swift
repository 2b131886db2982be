import FleetCore
import Synchronization

/// Whether a device's full-rate frames go to the coordinator now: only while the coordinator
/// wants them (frames.md, "Live frames on demand"). It said so with a lease; frames flow until
/// the lease runs out unless it is renewed, so a coordinator that goes silent stops the flow.
/// Read by the capture thread for every frame, set by the control thread: an atomic deadline.
final class LiveFlowGate: Sendable {
    /// CLOCK_MONOTONIC nanoseconds until which frames flow; 0 = closed.
    private let openUntil = Atomic<UInt64>(0)

    /// The coordinator listed the device (`wanted`) or left it out of its latest set.
    func wanted(_ wanted: Bool, leaseNanoseconds: UInt64, now: UInt64) {
        openUntil.store(wanted ? now + leaseNanoseconds : 0, ordering: .releasing)
    }

    func isOpen(at now: UInt64 = MonotonicTime.now()) -> Bool {
        now < openUntil.load(ordering: .acquiring)
    }
}
