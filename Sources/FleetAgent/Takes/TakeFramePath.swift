import FleetCapture
import FleetCore
import FleetProtocol

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
    /// The device's part ends after the frames submitted so far (`withholding`: consent was
    /// withdrawn, and what has not left the host stays on it).
    func end(takeID: String, deviceID: String, takeDrops: DropTally, reason: String, withholding: Bool)
    /// Why a refused frame was lost: out of buffers (the hand-off is full), or encoder late.
    var refusalReason: DropReason { get }
}

extension TakeFramePath {
    var refusalReason: DropReason { .outOfBuffers }
}

extension RecordSender: TakeFramePath {
    var reachesCoordinator: Bool { true }
}
