/// The rules a device command must meet, written once: the coordinator checks them before a
/// command goes out, so that an operator hears at once and an audit entry says why, and each
/// camera kind checks them again before it acts, since an agent trusts no sender. One
/// tolerance for each rule, so that the two never disagree about a value at the edge.
public enum DeviceCommandRules {
    /// Rounding room at the top of a format's zoom range: 4.000000000001x is 4x.
    public static let zoomTolerance = 1e-9
    /// Rounding room between a frame-rate range's ends.
    public static let frameRateRangeTolerance = 1e-9
    /// The fastest zoom ramp, in powers of two per second; 0 jumps to the factor.
    public static let fastestZoomRamp: Double = 16

    /// Whether `factor` lies in a zoom range from 1x to `maximum` (NaN does not).
    public static func zoomFits(_ factor: Double, maximum: Double) -> Bool {
        factor >= 1 && factor <= maximum + zoomTolerance
    }

    /// Whether a ramp may run at `rate` powers of two per second (0: a jump).
    public static func rampRateFits(_ rate: Double) -> Bool {
        rate >= 0 && rate <= fastestZoomRamp
    }

    /// How a frame-rate range fits a format.
    public enum FrameRateFit: Equatable, Sendable {
        case fits
        /// The slowest rate is not above 0, or is above the fastest.
        case inverted(minimum: Double, maximum: Double)
        /// One end of the range (the slowest first) that the format does not run.
        case outside(Double)
    }

    /// Whether `format` runs every end of the range from `minimum` to `maximum` frames per
    /// second (a single rate: both the same).
    public static func frameRateFit(minimum: Double, maximum: Double, in format: VideoFormat) -> FrameRateFit {
        guard minimum > 0, minimum <= maximum + frameRateRangeTolerance else { return .inverted(minimum: minimum, maximum: maximum) }
        for fps in [minimum, maximum] where !format.supports(framesPerSecond: fps) { return .outside(fps) }
        return .fits
    }

    /// Whether `index` names one of the device's formats.
    public static func formatFits(_ index: Int, of formats: [VideoFormat]) -> Bool {
        formats.indices.contains(index)
    }
}
