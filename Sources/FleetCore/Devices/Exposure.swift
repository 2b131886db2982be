import Glibc

/// Where a camera's exposure is and how far it can be set, in seconds of exposure time.
public struct ExposureState: Sendable, Equatable {
    /// The camera chooses the exposure time itself (auto exposure).
    public var automatic: Bool
    /// The exposure time now; in auto, what auto exposure chose (or the nominal time where
    /// the camera does not say).
    public var seconds: Double
    public var minimumSeconds: Double
    public var maximumSeconds: Double

    public init(automatic: Bool, seconds: Double, minimumSeconds: Double, maximumSeconds: Double) {
        self.automatic = automatic
        self.seconds = seconds
        self.minimumSeconds = minimumSeconds
        self.maximumSeconds = maximumSeconds
    }

    /// Why a manual exposure of `seconds` cannot be set, phrased for the operator, or nil
    /// when it is within the range. Automatic exposure is never out of range.
    public func refusal(of request: ExposureRequest) -> String? {
        guard case let .manual(seconds) = request else { return nil }
        // A hair of tolerance: a time read back from a device in its own units (100 µs for
        // V4L2) and sent again must not be refused for a rounding error.
        guard seconds.isFinite, seconds > 0, seconds >= minimumSeconds * (1 - 1e-9), seconds <= maximumSeconds * (1 + 1e-9) else {
            return "a manual exposure of \(Self.label(seconds)) is outside its range \(rangeLabel); choose a time in that range"
        }
        return nil
    }

    /// The range as people read it, e.g. "100 µs to 1 s".
    public var rangeLabel: String { "\(Self.label(minimumSeconds)) to \(Self.label(maximumSeconds))" }

    /// An exposure time as logs and errors show it: "250 µs", "2.5 ms", "1 s".
    public static func label(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "\(seconds) s" }
        let magnitude = abs(seconds)
        let (value, unit) = magnitude >= 1 || magnitude == 0 ? (seconds, "s") : magnitude >= 1e-3 ? (seconds * 1e3, "ms") : (seconds * 1e6, "µs")
        // Two decimals at most, none for whole numbers: 9 V4L2 units (9 × 100e-6 s) are 900.0000000000001 µs.
        let rounded = (value * 100).rounded() / 100
        return rounded == rounded.rounded() && abs(rounded) < 1e15 ? "\(Int(rounded)) \(unit)" : "\(rounded) \(unit)"
    }
}

/// What an operator asks of a camera's exposure.
public enum ExposureRequest: Sendable, Equatable {
    case automatic
    case manual(seconds: Double)
}

/// The exposure times of a bracket: one still per EV offset around a base exposure, as a
/// camera engineer counts stops (EV +1 is twice the exposure time, EV -1 half of it).
/// Times the camera cannot reach are clamped to its range, and each step says so, so that
/// a bracket of [-2, 0, 2] on a camera whose range ends at the base still shows which
/// stills really differ.
public struct ExposureBracket: Sendable, Equatable {
    public struct Step: Sendable, Equatable {
        /// The offset that was asked for, in stops.
        public var ev: Double
        /// The exposure time to set for this still: base × 2^ev, clamped to the camera's range.
        public var seconds: Double
        /// The camera's range cut the time short (or long): the still is not `ev` stops off.
        public var isClamped: Bool

        public init(ev: Double, seconds: Double, isClamped: Bool) {
            self.ev = ev
            self.seconds = seconds
            self.isClamped = isClamped
        }

        /// The request that sets this step's exposure.
        public var request: ExposureRequest { .manual(seconds: seconds) }
    }

    /// The exposure the offsets are counted from.
    public let baseSeconds: Double
    /// One step per offset, in the order the offsets were given.
    public let steps: [Step]

    public init(base: ExposureState, offsets: [Double]) throws(ExposureBracketError) {
        let minimum = base.minimumSeconds, maximum = base.maximumSeconds
        guard minimum.isFinite, maximum.isFinite, minimum >= 0, maximum > 0, minimum <= maximum else {
            throw .invalidRange(minimumSeconds: minimum, maximumSeconds: maximum)
        }
        guard base.seconds.isFinite, base.seconds > 0 else { throw .invalidBase(seconds: base.seconds) }
        if let offset = offsets.first(where: { !$0.isFinite }) { throw .invalidOffset(offset) }
        baseSeconds = base.seconds
        steps = offsets.map { ev in
            let wanted = base.seconds * Self.factor(ev: ev)
            let seconds = min(max(wanted, minimum), maximum)
            // Relative tolerance: a wanted time that only differs from the limit by floating
            // point is the limit itself, not a clamp.
            let isClamped = abs(seconds - wanted) > 1e-9 * max(seconds, wanted)
            return Step(ev: ev, seconds: seconds, isClamped: isClamped)
        }
    }

    /// 2^ev; exp2 is exact for whole stops.
    static func factor(ev: Double) -> Double { exp2(ev) }
}

/// Why a bracket cannot be worked out.
public enum ExposureBracketError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidRange(minimumSeconds: Double, maximumSeconds: Double)
    case invalidBase(seconds: Double)
    case invalidOffset(Double)

    public var description: String {
        switch self {
        case let .invalidRange(minimum, maximum):
            "cannot bracket an exposure whose range is \(minimum) s to \(maximum) s; the camera must report a positive maximum and a minimum between 0 and it"
        case let .invalidBase(seconds):
            "cannot bracket around an exposure of \(seconds) s; the base exposure must be a positive time"
        case let .invalidOffset(offset):
            "cannot bracket at \(offset) EV; offsets are finite numbers of stops, e.g. -2, 0, 2"
        }
    }
}
