import FleetCapture
import FleetCore
import FleetProtocol
import Synchronization

/// Where a device's take frames go from its capture thread: to the coordinator over the
/// recording path (`RecordSender`), or into segments on this host's disk (`AgentTakeStore`).
/// The device's state decides which frames belong to the take; the path only takes them.
protocol TakeFramePath: Sendable {
    /// Whether the frames it takes reach the coordinator as the raw frames its live consumers
    /// want, which it serves them from (then they need not go on the live path too).
    var reachesCoordinator: Bool { get }
    /// The device's part of `takeID` begins (idempotent).
    func begin(takeID: String, deviceID: String)
    /// Called on a capture thread; never blocks. False when the frame could not be taken:
    /// the caller counts it as `refusalReason`.
    func submit(takeID: String, deviceID: String, header: Capfleet_V1_FrameHeader, takeDrops: DropTally, pixels: FrameBuffer, count: Int) -> Bool
    /// A take's pre-roll, before its first live frame (recordings.md, "Pre-roll"): called on a
    /// capture thread, never blocks. Paths with a queue of their own take every frame whatever
    /// it holds (their memory is already spent); the frames refused come back as a count.
    func submitPreRoll(takeID: String, deviceID: String, frames: [PreRollFrame], takeDrops: DropTally) -> Int
    /// The device's part ends after the frames submitted so far (`withholding`: consent was
    /// withdrawn, and what has not left the host stays on it).
    func end(takeID: String, deviceID: String, takeDrops: DropTally, reason: String, withholding: Bool)
    /// Why a refused frame was lost: out of buffers (the hand-off is full), or encoder late.
    var refusalReason: DropReason { get }
    /// The part's write queue (DeviceCounters.take_queue_*): nil where the path keeps none of
    /// the part's own (the recording path spools to disk instead).
    func queue(takeID: String, deviceID: String) -> TakeQueueFigures?
    /// Whether the frames it takes go on to the camera's encoded pre-roll (PreRollTap), which
    /// must then not be handed them again.
    var feedsPreRoll: Bool { get }
}

extension TakeFramePath {
    var refusalReason: DropReason { .outOfBuffers }
    func submitPreRoll(takeID: String, deviceID: String, frames: [PreRollFrame], takeDrops: DropTally) -> Int {
        frames.reduce(0) { refused, kept in
            refused
                + (submit(takeID: takeID, deviceID: deviceID, header: kept.header, takeDrops: takeDrops, pixels: kept.pixels, count: kept.count)
                    ? 0 : 1)
        }
    }
    func queue(takeID: String, deviceID: String) -> TakeQueueFigures? { nil }
    var feedsPreRoll: Bool { false }
}

/// A take part's write queue as the status reports it: frames waiting now, how many may
/// wait, and the most that waited since the part began.
struct TakeQueueFigures: Sendable, Equatable {
    var depth: Int
    var capacity: Int
    var peak: Int

    var fill: Double { capacity > 0 ? Double(peak) / Double(capacity) : 0 }
}

/// The most frames a part's queue held, noted from the capture thread after each offer.
final class TakeQueuePeak: Sendable {
    private let peak = Atomic<Int>(0)

    init() {}

    func noted(depth: Int) { _ = peak.max(depth, ordering: .relaxed) }

    /// A frame refused: the queue was full.
    func full(capacity: Int) { noted(depth: capacity) }

    var value: Int { peak.load(ordering: .relaxed) }
}

extension RecordSender: TakeFramePath {
    var reachesCoordinator: Bool { true }
}
