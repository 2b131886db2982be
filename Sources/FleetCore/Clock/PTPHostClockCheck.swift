/// Whether a PTP camera's clock and the host's CLOCK_REALTIME keep the same time (proto-docs
/// device-model.md, "GenICam cameras"; clock.md, "Scheduled action commands"). A camera locked
/// to a PTP grandmaster stamps its exposures in PTP time; a host whose clock follows the same
/// grandmaster (ptp4l and phc2sys, or all hosts of the test bed, which share one kernel clock)
/// reads the same time, give or take the timescale: PTP counts TAI, 37 s ahead of the UTC the
/// host's clock usually keeps. The check is the frames themselves: put on the host's clock by
/// the host's time, every frame must arrive after its exposure and not long after. Fed each
/// frame's camera time and its arrival on CLOCK_REALTIME; keeps each second's shortest delay.
public struct PTPHostClockCheck: Sendable, Equatable {
    /// Each second's shortest (arrival − camera time), newest last.
    private var minima: [(second: UInt64, delay: Int64)] = []
    public let windowSeconds: Int

    /// The offsets of the camera's timescale from the host's that are tried: the same
    /// timescale, or TAI on a host that keeps UTC (37 s since 2017), or what the kernel says.
    public static func timescaleOffsets(kernelTAIOffsetSeconds: Int64) -> [Int64] {
        var offsets: [Int64] = [0, 37_000_000_000]
        if kernelTAIOffsetSeconds > 0, kernelTAIOffsetSeconds != 37 { offsets.append(kernelTAIOffsetSeconds * 1_000_000_000) }
        return offsets
    }

    /// A frame can arrive this long after its exposure started (a long exposure, then a large
    /// frame over a slow link) and still prove the clocks agree.
    public static let longestDelay: Int64 = 2_000_000_000
    /// A frame that seems to arrive before its exposure by more than this says the clocks differ.
    public static let earliestArrival: Int64 = -200_000

    public init(windowSeconds: Int = 10) {
        self.windowSeconds = max(windowSeconds, 2)
    }

    public static func == (left: Self, right: Self) -> Bool {
        left.windowSeconds == right.windowSeconds && left.minima.elementsEqual(right.minima) { $0.second == $1.second && $0.delay == $1.delay }
    }

    public mutating func add(cameraNs: UInt64, arrivalRealtimeNs: UInt64) {
        let delay = Int64(bitPattern: arrivalRealtimeNs &- cameraNs)
        let second = arrivalRealtimeNs / 1_000_000_000
        if let last = minima.last, last.second == second {
            minima[minima.count - 1].delay = min(last.delay, delay)
        } else {
            minima.append((second, delay))
            if minima.count > windowSeconds { minima.removeFirst(minima.count - windowSeconds) }
        }
    }

    /// Forgets the frames seen (the camera was opened again, or its clock jumped).
    public mutating func reset() { minima.removeAll() }

    public enum Verdict: Sendable, Equatable {
        /// Too few seconds of frames to tell.
        case unknown
        /// The host's clock keeps the camera's time: camera time = host CLOCK_REALTIME +
        /// `timescaleOffset`; frames arrive at least `residual` after their exposure.
        case agrees(timescaleOffset: Int64, residual: Int64)
        /// No timescale puts every arrival after its exposure and within `longestDelay`:
        /// `shortestDelay` is arrival − camera time as read.
        case disagrees(shortestDelay: Int64)
    }

    /// The verdict over the window (at least two seconds of frames), trying `offsets`.
    public func verdict(offsets: [Int64]) -> Verdict {
        guard minima.count >= 2, let shortest = minima.map(\.delay).min() else { return .unknown }
        for offset in offsets {
            let residual = shortest &+ offset
            if residual >= Self.earliestArrival, residual <= Self.longestDelay { return .agrees(timescaleOffset: offset, residual: residual) }
        }
        return .disagrees(shortestDelay: shortest)
    }
}
