import FleetProtocol
import Foundation
import Synchronization

/// FindFirstFrame requests waiting for a device's first frame at or after a fleet time
/// (proto-docs/clock.md). The capture thread answers them as frames are stamped; a timer
/// answers those that wait too long. Each is answered exactly once.
final class FrameWatches: Sendable {
    typealias Answer = @Sendable (Capfleet_V1_FrameTiming?) -> Void
    private struct Watch {
        var fleetTime: UInt64
        var answer: Answer
    }
    private let watches = Mutex<(next: UInt64, pending: [UInt64: Watch])>((0, [:]))

    func add(atFleetTime fleetTime: UInt64, waitingAtMost nanoseconds: UInt64, answer: @escaping Answer) {
        let id = watches.withLock { state -> UInt64 in
            state.next += 1
            state.pending[state.next] = Watch(fleetTime: fleetTime, answer: answer)
            return state.next
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(min(nanoseconds, UInt64(Int.max))))) { [self] in
            watches.withLock { $0.pending.removeValue(forKey: id) }?.answer(nil)
        }
    }

    /// Called on the capture thread for every stamped frame; `timing` is made only when a
    /// watch is answered.
    func captured(atFleetTime fleetTime: UInt64, timing: () -> Capfleet_V1_FrameTiming) {
        let due = watches.withLock { state -> [Watch] in
            guard !state.pending.isEmpty else { return [] }
            let due = state.pending.filter { $0.value.fleetTime <= fleetTime }
            for id in due.keys { state.pending[id] = nil }
            return Array(due.values)
        }
        guard !due.isEmpty else { return }
        let found = timing()
        for watch in due { watch.answer(found) }
    }
}
