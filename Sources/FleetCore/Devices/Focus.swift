/// Focus in the terms camera engineers use: a mode, a lens position from 0 (nearest) to
/// 1 (furthest), a point of interest in normalised frame coordinates, a range restriction
/// and smooth (slow, unobtrusive) focusing for video.
public enum FocusMode: String, Sendable, CaseIterable {
    /// The lens stays where it is (or where `lensPosition` puts it).
    case locked
    /// Focus once on the point of interest, then lock.
    case auto
    /// Keep focusing as the scene changes.
    case continuous
}

public enum FocusRangeRestriction: String, Sendable, CaseIterable {
    case none, near, far
}

/// A point in the frame, each coordinate 0...1 from the top-left corner.
public struct NormalizedPoint: Hashable, Sendable {
    public var x: Double
    public var y: Double

    public init(x: Double, y: Double) {
        self.x = x
        self.y = y
    }

    public var isInsideFrame: Bool { (0...1).contains(x) && (0...1).contains(y) }
}

/// What a device's focus can do; everything false means it has no focus control at all.
public struct FocusCapabilities: Hashable, Sendable {
    public var modes: [FocusMode]
    public var lensPosition: Bool
    public var pointOfInterest: Bool
    public var rangeRestriction: Bool
    public var smoothFocus: Bool
    /// The near end of the focus range, mm, where the device knows it (V4L2 does not say).
    public var minimumFocusDistanceMillimetres: Double?

    public init(
        modes: [FocusMode] = [], lensPosition: Bool = false, pointOfInterest: Bool = false,
        rangeRestriction: Bool = false, smoothFocus: Bool = false, minimumFocusDistanceMillimetres: Double? = nil
    ) {
        self.modes = modes
        self.lensPosition = lensPosition
        self.pointOfInterest = pointOfInterest
        self.rangeRestriction = rangeRestriction
        self.smoothFocus = smoothFocus
        self.minimumFocusDistanceMillimetres = minimumFocusDistanceMillimetres
    }

    public static let none = FocusCapabilities()

    public var isSupported: Bool { !modes.isEmpty || lensPosition }

    /// What the device offers, for "unsupported" replies: e.g. "modes locked, auto; lens position".
    public var summary: String {
        guard isSupported else { return "no focus control" }
        var parts = ["modes " + modes.map(\.rawValue).joined(separator: ", ")]
        if lensPosition { parts.append("lens position") }
        if pointOfInterest { parts.append("point of interest") }
        if rangeRestriction { parts.append("range restriction") }
        if smoothFocus { parts.append("smooth focus") }
        return parts.joined(separator: "; ")
    }
}

/// Where a device's focus is now.
public struct FocusState: Hashable, Sendable {
    public var mode: FocusMode
    /// Nil when the device cannot report it.
    public var lensPosition: Double?
    /// True while the lens is moving to a new target.
    public var isAdjusting: Bool
    public var pointOfInterest: NormalizedPoint
    public var rangeRestriction: FocusRangeRestriction
    public var smoothFocus: Bool

    public init(
        mode: FocusMode = .locked, lensPosition: Double? = nil, isAdjusting: Bool = false,
        pointOfInterest: NormalizedPoint = NormalizedPoint(x: 0.5, y: 0.5),
        rangeRestriction: FocusRangeRestriction = .none, smoothFocus: Bool = false
    ) {
        self.mode = mode
        self.lensPosition = lensPosition
        self.isAdjusting = isAdjusting
        self.pointOfInterest = pointOfInterest
        self.rangeRestriction = rangeRestriction
        self.smoothFocus = smoothFocus
    }
}

/// One focus command: each part left nil stays as it is.
public struct FocusRequest: Hashable, Sendable {
    public var mode: FocusMode?
    public var lensPosition: Double?
    public var pointOfInterest: NormalizedPoint?
    public var rangeRestriction: FocusRangeRestriction?
    public var smoothFocus: Bool?

    public init(
        mode: FocusMode? = nil, lensPosition: Double? = nil, pointOfInterest: NormalizedPoint? = nil,
        rangeRestriction: FocusRangeRestriction? = nil, smoothFocus: Bool? = nil
    ) {
        self.mode = mode
        self.lensPosition = lensPosition
        self.pointOfInterest = pointOfInterest
        self.rangeRestriction = rangeRestriction
        self.smoothFocus = smoothFocus
    }

    /// The parts of this request the device cannot do, or that are out of range, in words;
    /// empty when it can be applied as a whole.
    public func problems(on capabilities: FocusCapabilities) -> [String] {
        var problems: [String] = []
        if let mode, !capabilities.modes.contains(mode) { problems.append("focus mode \(mode.rawValue)") }
        if let lensPosition {
            if !capabilities.lensPosition {
                problems.append("lens position")
            } else if !(0...1).contains(lensPosition) {
                problems.append("lens position \(lensPosition) (must be 0...1)")
            }
        }
        if let pointOfInterest {
            if !capabilities.pointOfInterest {
                problems.append("point of interest")
            } else if !pointOfInterest.isInsideFrame {
                problems.append("point of interest outside 0...1")
            }
        }
        if let rangeRestriction, rangeRestriction != .none, !capabilities.rangeRestriction { problems.append("range restriction") }
        if smoothFocus == true, !capabilities.smoothFocus { problems.append("smooth focus") }
        if mode == nil, lensPosition == nil, pointOfInterest == nil, rangeRestriction == nil, smoothFocus == nil {
            problems.append("an empty focus request")
        }
        return problems
    }
}

extension FocusRequest {
    /// e.g. "mode auto, point (0.5, 0.2), smooth on", for audit entries and replies.
    public var summary: String {
        var parts: [String] = []
        if let mode { parts.append("mode \(mode.rawValue)") }
        if let lensPosition { parts.append("lens position \(lensPosition)") }
        if let pointOfInterest { parts.append("point (\(pointOfInterest.x), \(pointOfInterest.y))") }
        if let rangeRestriction { parts.append("range \(rangeRestriction.rawValue)") }
        if let smoothFocus { parts.append("smooth \(smoothFocus ? "on" : "off")") }
        return parts.isEmpty ? "no change" : parts.joined(separator: ", ")
    }
}
