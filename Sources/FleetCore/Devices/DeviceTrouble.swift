/// Why a device deserves an operator's attention right now, for `capfleet watch`: offline,
/// interrupted, losing frames, stalled, running well below its rate, or on a host under
/// serious pressure. Pure: the caller passes what it saw.
public enum DeviceTrouble {
    public struct Observation: Sendable {
        public var online: Bool
        public var streaming: Bool
        public var interruption: InterruptionReason?
        public var drops: DropTally
        /// The drops at the previous look, if there was one.
        public var previousDrops: DropTally?
        public var framesPerSecond: Double
        public var activeFrameRate: Double
        /// The previous look's rate and active rate: a device is slow only when it was slow
        /// then too, since a rate change shows as slow for a second (the meter lags).
        public var previousRates: (framesPerSecond: Double, activeFrameRate: Double)?
        /// Milliseconds since the last frame; nil before the first.
        public var lastFrameAgeMilliseconds: Int64?
        public var nodePressure: PressureLevel?

        public init(
            online: Bool, streaming: Bool, interruption: InterruptionReason?, drops: DropTally, previousDrops: DropTally?,
            framesPerSecond: Double, activeFrameRate: Double, previousRates: (framesPerSecond: Double, activeFrameRate: Double)? = nil,
            lastFrameAgeMilliseconds: Int64?, nodePressure: PressureLevel?
        ) {
            self.previousRates = previousRates
            self.online = online
            self.streaming = streaming
            self.interruption = interruption
            self.drops = drops
            self.previousDrops = previousDrops
            self.framesPerSecond = framesPerSecond
            self.activeFrameRate = activeFrameRate
            self.lastFrameAgeMilliseconds = lastFrameAgeMilliseconds
            self.nodePressure = nodePressure
        }
    }

    /// Short reasons, worst first; empty when all is well.
    public static func reasons(_ seen: Observation) -> [String] {
        guard seen.online else { return ["offline"] }
        var reasons: [String] = []
        if let interruption = seen.interruption { reasons.append("interrupted (\(interruption.rawValue))") }
        if let previous = seen.previousDrops {
            let late = seen.drops.late &- previous.late, noBuffer = seen.drops.outOfBuffers &- previous.outOfBuffers
            let gaps = seen.drops.discontinuity &- previous.discontinuity
            let parts = [(late, "late"), (noBuffer, "no buffer"), (gaps, "gaps")].filter { $0.0 > 0 && $0.0 < UInt64.max / 2 }
            if !parts.isEmpty { reasons.append("dropping (" + parts.map { "\($0.0) \($0.1)" }.joined(separator: ", ") + ")") }
        }
        if seen.interruption == nil, seen.streaming, seen.activeFrameRate > 0 {
            // Three frame periods, and at least two seconds, without a frame.
            // Computed in Double: a peer's absurdly small rate must not overflow Int64.
            let stallAfter = Int64(min(max(2000, 3000 / seen.activeFrameRate), 86_400_000))
            if let age = seen.lastFrameAgeMilliseconds, age > stallAfter {
                reasons.append("stalled (no frame for \(age / 1000) s)")
            } else if seen.framesPerSecond > 0, seen.framesPerSecond < 0.8 * seen.activeFrameRate,
                let previous = seen.previousRates, previous.framesPerSecond < 0.8 * previous.activeFrameRate
            {
                reasons.append(
                    "slow (\(VideoFormat.trim((seen.framesPerSecond * 10).rounded() / 10)) of \(VideoFormat.trim(seen.activeFrameRate)) fps)")
            }
        }
        if let pressure = seen.nodePressure, pressure >= .serious { reasons.append("host pressure \(pressure)") }
        return reasons
    }
}
