/// The fleet's frame grid: a slot every `interval` ns of fleet time from `origin`, on which
/// every steered camera's exposures should start (proto-docs/clock.md, "Frame alignment").
public struct FrameGrid: Sendable, Equatable {
    public var origin: UInt64
    public var interval: UInt64

    public init(origin: UInt64, interval: UInt64) {
        self.origin = origin
        self.interval = interval
    }

    /// How far `fleetTime` lies from the nearest slot: in (−interval/2, interval/2], ns;
    /// negative is early. The same measure as `FrameAligner`'s.
    public func phase(of fleetTime: UInt64) -> Int64 {
        FrameAligner(origin: origin).phase(ofFleetTime: fleetTime, period: interval)
    }
}

/// How far from their slots a camera's recent exposures started: |phase| over a window of
/// frames, as the devices view and a take's report show it.
public struct PhaseStatistics: Sendable, Equatable {
    public var frames: Int
    public var median: UInt64
    public var p99: UInt64
    public var maximum: UInt64

    public static let empty = PhaseStatistics(frames: 0, median: 0, p99: 0, maximum: 0)

    public init(frames: Int, median: UInt64, p99: UInt64, maximum: UInt64) {
        self.frames = frames
        self.median = median
        self.p99 = p99
        self.maximum = maximum
    }

    /// Nearest-rank percentiles of `magnitudes` (|phase| in ns).
    public init(magnitudes: some Collection<UInt64>) {
        guard !magnitudes.isEmpty else {
            self = .empty
            return
        }
        let sorted = magnitudes.sorted()
        func rank(_ share: Double) -> UInt64 {
            let index = Int((share * Double(sorted.count)).rounded(.up)) - 1
            return sorted[min(max(index, 0), sorted.count - 1)]
        }
        self.init(frames: sorted.count, median: rank(0.5), p99: rank(0.99), maximum: sorted[sorted.count - 1])
    }
}
