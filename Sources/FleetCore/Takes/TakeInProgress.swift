/// One device's part of a take, as its agent sees it: which captured frames belong to the
/// take (fleet time at or after its start and before its stop) and the take's own drops.
/// The live path's late drops are not the take's: its frames never wait behind the live
/// socket.
public struct TakeInProgress: Sendable, Equatable {
    public let takeID: String
    /// Fleet ns of the first instant in the take.
    public let start: UInt64
    /// Fleet ns the take stops at, once a stop has been asked for one in the future.
    public private(set) var stop: UInt64?
    /// The device's drops when the take began: the take counts from there.
    private let baseDrops: DropTally
    /// Frames the hand-off to the recording path could not take (out of buffers), and those
    /// the take's encoder could not keep up with.
    private var handoffDrops: UInt64 = 0
    private var encoderDrops: UInt64 = 0

    public init(takeID: String, start: UInt64, deviceDrops: DropTally) {
        self.takeID = takeID
        self.start = start
        baseDrops = deviceDrops
    }

    /// What a frame captured at `fleetTime` means for the take.
    public enum FrameFate: Sendable, Equatable {
        /// Before the start: not the take's.
        case outside
        /// The take's: record it.
        case record
        /// At or after the stop: the take ends with this frame, which it does not keep.
        case ends
    }

    public func fate(ofFrameAt fleetTime: UInt64) -> FrameFate {
        guard fleetTime >= start else { return .outside }
        if let stop, fleetTime >= stop { return .ends }
        return .record
    }

    /// The stop asked for: true when the take ends now (the stop is not in the future, or
    /// frames must be withheld), false when it waits for the first frame at or after `stop`.
    public mutating func stopAsked(at stop: UInt64?, nowFleet: UInt64?, withholding: Bool) -> Bool {
        if !withholding, let stop, let nowFleet, stop > nowFleet {
            self.stop = stop
            return false
        }
        return true
    }

    /// A stop instant that passed with no frame after it (the device captures nothing).
    public func isDue(nowFleet: UInt64) -> Bool {
        guard let stop else { return false }
        return nowFleet >= stop
    }

    public mutating func handoffDropped(_ reason: DropReason = .outOfBuffers, count: UInt64 = 1) {
        if reason == .encoderLate { encoderDrops += count } else { handoffDrops += count }
    }

    /// The take's drops, given the device's now.
    public func drops(deviceDrops: DropTally) -> DropTally {
        let since = deviceDrops.since(baseDrops)
        return DropTally(
            late: 0, outOfBuffers: since.outOfBuffers + handoffDrops, discontinuity: since.discontinuity,
            encoderLate: encoderDrops)
    }
}
