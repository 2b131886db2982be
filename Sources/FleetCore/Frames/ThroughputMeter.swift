/// Frames and bytes per second from monotonic counters, over the interval between two
/// samples (the telemetry publisher samples once a second).
public struct ThroughputMeter: Sendable {
    private var last: (time: UInt64, frames: UInt64, bytes: UInt64)?
    public private(set) var framesPerSecond: Double = 0
    public private(set) var bytesPerSecond: Double = 0

    public init() {}

    public mutating func sample(frames: UInt64, bytes: UInt64, at now: UInt64) {
        defer { last = (now, frames, bytes) }
        guard let last, now > last.time else { return }
        let seconds = Double(now - last.time) / 1e9
        framesPerSecond = Double(frames &- last.frames) / seconds
        bytesPerSecond = Double(bytes &- last.bytes) / seconds
    }
}
