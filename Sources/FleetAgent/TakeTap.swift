import FleetCapture
import FleetCore
import FleetProtocol
import Synchronization

/// One device's part of a take, seen from its capture thread: which captured frames belong
/// to the take (fleet time at or after its start and before its stop) and go to the
/// recording path, and the take's own drops. The live path's late drops are not the take's:
/// its frames never wait behind the live socket.
final class TakeTap: Sendable {
    private struct Active {
        var takeID: String
        var start: UInt64
        var stop: UInt64?
        /// The device's drops when the take began: the take counts from there.
        var baseDrops: DropTally
        /// Frames the hand-off to the sender could not take.
        var handoffDrops: UInt64 = 0
        var sender: RecordSender
    }

    private let deviceID: String
    private let active = Mutex<Active?>(nil)

    init(deviceID: String) { self.deviceID = deviceID }

    var takeID: String? { active.withLock { $0?.takeID } }

    /// The take begins at `start` (fleet ns). A repeated begin of the same take (the
    /// coordinator says it again at every registration) keeps what is under way.
    func begin(takeID: String, start: UInt64, sender: RecordSender, deviceDrops: DropTally) {
        active.withLock { active in
            if active?.takeID == takeID { return }
            active = Active(takeID: takeID, start: start, baseDrops: deviceDrops, sender: sender)
        }
        // Said again at every registration: the sender takes the part up again if it dropped it.
        sender.begin(takeID: takeID, deviceID: deviceID)
    }

    /// The take ends at `stop` (fleet ns): at once if that is not in the future by `nowFleet`,
    /// else with the first frame captured at or after it. With `withholding`, consent was
    /// withdrawn: it ends now and frames not yet sent stay on this host.
    func end(takeID: String, stop: UInt64?, nowFleet: UInt64?, reason: String, withholding: Bool, deviceDrops: DropTally) {
        let ended = active.withLock { active -> Active? in
            guard let current = active, current.takeID == takeID else { return nil }
            if !withholding, let stop, let nowFleet, stop > nowFleet {
                active?.stop = stop
                return nil
            }
            active = nil
            return current
        }
        guard let ended else { return }
        ended.sender.end(takeID: takeID, deviceID: deviceID, takeDrops: Self.takeDrops(ended, deviceDrops), reason: reason,
                         withholding: withholding)
    }

    /// A stop instant that passed with no frame after it (the device is not capturing).
    func endIfDue(nowFleet: UInt64, deviceDrops: DropTally) {
        let ended = active.withLock { active -> Active? in
            guard let current = active, let stop = current.stop, nowFleet >= stop else { return nil }
            active = nil
            return current
        }
        guard let ended else { return }
        ended.sender.end(takeID: ended.takeID, deviceID: deviceID, takeDrops: Self.takeDrops(ended, deviceDrops), reason: "stopped",
                         withholding: false)
    }

    /// Called on the capture thread for every frame sent on the live path, with its fleet
    /// time (nil while the clock has no estimate: such a frame cannot be placed in a take).
    /// A frame the take keeps is copied once, out of the capture buffer: the copy goes to the
    /// recording path and, returned, to the live path too, so the camera's buffer is free at
    /// once and a stalled live path can never starve a camera being recorded.
    func offer(_ frame: CapturedFrame, header: Capfleet_V1_FrameHeader, fleetTime: UInt64?, deviceDrops: DropTally) -> CapturedFrame? {
        guard let fleetTime else { return nil }
        enum Action { case none, record(Active), end(Active) }
        let action = active.withLock { active -> Action in
            guard let current = active, fleetTime >= current.start else { return .none }
            if let stop = current.stop, fleetTime >= stop {
                active = nil
                return .end(current)
            }
            return .record(current)
        }
        switch action {
        case .none:
            return nil
        case let .end(ended):
            ended.sender.end(takeID: ended.takeID, deviceID: deviceID, takeDrops: Self.takeDrops(ended, deviceDrops), reason: "stopped",
                             withholding: false)
            return nil
        case let .record(current):
            let copy = FrameBuffer(unpooledCapacity: frame.byteCount)
            copy.storage.copyMemory(from: frame.buffer.storage, byteCount: frame.byteCount)
            let taken = current.sender.submit(takeID: current.takeID, deviceID: deviceID, header: header,
                                              takeDrops: Self.takeDrops(current, deviceDrops), pixels: copy, count: frame.byteCount)
            if !taken {
                active.withLock { if $0?.takeID == current.takeID { $0?.handoffDrops += 1 } }
            }
            return CapturedFrame(buffer: copy, byteCount: frame.byteCount, sequence: frame.sequence,
                                 captureMonotonicNanoseconds: frame.captureMonotonicNanoseconds, layout: frame.layout, zoomFactor: frame.zoomFactor)
        }
    }

    private static func takeDrops(_ take: Active, _ deviceDrops: DropTally) -> DropTally {
        let since = deviceDrops.since(take.baseDrops)
        return DropTally(late: 0, outOfBuffers: since.outOfBuffers + take.handoffDrops, discontinuity: since.discontinuity)
    }
}
