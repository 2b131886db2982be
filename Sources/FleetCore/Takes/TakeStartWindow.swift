/// When a take may start. A start already past is a take that claims frames nobody can
/// record (`--at 2020-01-01` would be a take years long before its first frame); a start
/// far ahead is almost always a mistyped date, and it holds the devices meanwhile. A
/// little of the past is allowed: an instant computed by a script reaches the coordinator
/// a moment after it was read.
public struct TakeStartWindow: Sendable, Equatable {
    /// How far behind the fleet's time a start may be, in ns.
    public var pastTolerance: UInt64
    /// How far ahead of it a start may be, in ns.
    public var horizon: UInt64

    public static let standard = TakeStartWindow(pastTolerance: 2_000_000_000, horizon: 24 * 3_600 * 1_000_000_000)

    public init(pastTolerance: UInt64, horizon: UInt64) {
        self.pastTolerance = pastTolerance
        self.horizon = horizon
    }

    public enum Refusal: Sendable, Equatable {
        /// The start is this many ns behind the fleet's time.
        case past(byNs: UInt64)
        /// The start is this many ns ahead of it.
        case tooFarAhead(byNs: UInt64)
    }

    public func refusal(startFleetNs: UInt64, nowFleetNs: UInt64) -> Refusal? {
        if startFleetNs + pastTolerance < nowFleetNs { return .past(byNs: nowFleetNs - startFleetNs) }
        if startFleetNs > nowFleetNs, startFleetNs - nowFleetNs > horizon { return .tooFarAhead(byNs: startFleetNs - nowFleetNs) }
        return nil
    }

    /// A duration as people say it: 850 ms, 4.2 s, 3.5 h, 6.9 years.
    public static func spoken(_ ns: UInt64) -> String {
        let seconds = Double(ns) / 1e9
        func one(_ value: Double, _ unit: String) -> String {
            let rounded = (value * 10).rounded() / 10
            return rounded == rounded.rounded() ? "\(Int(rounded)) \(unit)" : "\(rounded) \(unit)"
        }
        switch seconds {
        case ..<1: return "\(Int((seconds * 1000).rounded())) ms"
        case ..<120: return one(seconds, "s")
        case ..<7_200: return one(seconds / 60, "min")
        case ..<172_800: return one(seconds / 3_600, "h")
        case ..<(2 * 365.25 * 86_400): return one(seconds / 86_400, "days")
        default: return one(seconds / (365.25 * 86_400), "years")
        }
    }
}
