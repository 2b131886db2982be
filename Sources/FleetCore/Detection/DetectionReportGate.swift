/// Which examined frames of a camera are reported (detection.md, "Reports"): every frame with
/// objects, and the first without any after one with some, so a subscriber that saw objects is
/// told they are gone. It follows what subscribers were told, not what the detectors look
/// for: a change of settings (a narrower region, a symbology dropped) that leaves nothing to
/// find is reported like objects leaving the picture.
public struct DetectionReportGate: Sendable, Equatable {
    /// The last report sent had objects.
    public private(set) var lastReportHadObjects = false

    public init() {}

    /// Whether a frame with `objectCount` objects is reported; notes it if so.
    public mutating func shouldReport(objectCount: Int) -> Bool {
        guard objectCount > 0 || lastReportHadObjects else { return false }
        lastReportHadObjects = objectCount > 0
        return true
    }
}
