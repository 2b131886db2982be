import FleetCore
import FleetProtocol
import Synchronization

/// Counters for one device, written by its capture thread and the publisher thread and
/// read by the control thread for status reports; atomics, so nobody waits on a lock.
public final class DeviceStatistics: Sendable {
    public let deviceID: String
    public let framesCaptured = Atomic<UInt64>(0)
    /// Payload bytes of the frames counted in `framesCaptured`, sent or not.
    public let bytesCaptured = Atomic<UInt64>(0)
    /// The latest captured frame's sequence and layout, for status: the coordinator knows a
    /// device's format without receiving its frames.
    let latest = Mutex<(sequence: UInt64, layout: Capfleet_V1_FrameLayout)>((0, Capfleet_V1_FrameLayout()))
    public let framesSent = Atomic<UInt64>(0)
    public let bytesSent = Atomic<UInt64>(0)
    public let late = Atomic<UInt64>(0)
    /// Frames not sent because consent is not granted and the format cannot be made black.
    public let withheld = Atomic<UInt64>(0)
    let discontinuity = Atomic<UInt64>(0)
    /// Frames a take's encoder could not keep up with (recordings.md, "Codecs").
    let encoderLate = Atomic<UInt64>(0)
    /// Previews (frames.md, "Previews"): sent; not made because the last was still being made
    /// or was replaced by a newer one before it went out; not made because the pixel format
    /// cannot be pictured; failed to encode. None of them is a frame or a drop.
    public let previewsSent = Atomic<UInt64>(0)
    public let previewsSkipped = Atomic<UInt64>(0)
    public let previewsUnsupported = Atomic<UInt64>(0)
    public let previewsFailed = Atomic<UInt64>(0)
    /// Out-of-buffers drops are counted by the source itself.
    private let outOfBuffers: @Sendable () -> UInt64

    public init(deviceID: String, outOfBuffers: @escaping @Sendable () -> UInt64) {
        self.deviceID = deviceID
        self.outOfBuffers = outOfBuffers
    }

    public var drops: DropTally {
        DropTally(
            late: late.load(ordering: .relaxed), outOfBuffers: outOfBuffers(),
            discontinuity: discontinuity.load(ordering: .relaxed), encoderLate: encoderLate.load(ordering: .relaxed))
    }

    var wire: Capfleet_V1_DeviceCounters {
        .with {
            $0.deviceID = deviceID
            $0.framesCaptured = framesCaptured.load(ordering: .relaxed)
            $0.bytesCaptured = bytesCaptured.load(ordering: .relaxed)
            let latest = self.latest.withLock { $0 }
            $0.lastSequence = latest.sequence
            if latest.layout.width > 0 { $0.layout = latest.layout }
            $0.framesSent = framesSent.load(ordering: .relaxed)
            $0.bytesSent = bytesSent.load(ordering: .relaxed)
            $0.drops = drops.wire
        }
    }
}
