/// How a camera's auto-framing behaves (detection.md, "Auto-framing"): the fleet's Center
/// Stage, a crop of the whole picture that keeps the detected faces in view.
public struct FramingSettings: Hashable, Sendable, Codable {
    /// Space left around the faces, as a fraction of their box's height on each side.
    public var margin: Double
    /// How fast the crop may move or grow, as a fraction of the frame's width per second.
    public var maximumSpeed: Double
    /// How long the faces must stay off the crop's centre (or out of it) before it reframes:
    /// a face that moves briefly does not make the picture wander.
    public var holdSeconds: Double
    /// The smallest crop, as a fraction of the frame's width: how far it may zoom in, which
    /// the format's resolution bounds (`minimumFormatWidth`).
    public var minimumCrop: Double
    /// Frame with the camera's own zoom, pan and tilt (`OpticalView`) instead of a crop: the
    /// frames then show only the framed view, at the format's full resolution, and cannot be
    /// un-framed later.
    public var optics: Bool

    public static let standard = FramingSettings(margin: 0.5, maximumSpeed: 0.5, holdSeconds: 0.6, minimumCrop: 0.5)
    /// Framing needs headroom: a crop of half the frame must keep at least 640 pixels a row,
    /// so it runs on formats 1280 pixels wide or more.
    public static let minimumFormatWidth = 1280

    public init(margin: Double, maximumSpeed: Double, holdSeconds: Double, minimumCrop: Double, optics: Bool = false) {
        self.margin = margin
        self.maximumSpeed = maximumSpeed
        self.holdSeconds = holdSeconds
        self.minimumCrop = minimumCrop
        self.optics = optics
    }

    /// Why these settings cannot be taken, or nil.
    public var problem: String? {
        if !margin.isFinite || margin < 0 || margin > 2 { return "--margin \(margin) is out of range: 0 to 2 face heights" }
        if !maximumSpeed.isFinite || maximumSpeed <= 0 || maximumSpeed > 10 {
            return "--speed \(maximumSpeed) is out of range: more than 0, at most 10 frame widths a second"
        }
        if !holdSeconds.isFinite || holdSeconds < 0 || holdSeconds > 10 { return "--hold \(holdSeconds) is out of range: 0 to 10 s" }
        if !minimumCrop.isFinite || minimumCrop < 0.1 || minimumCrop > 1 {
            return "--min-crop \(minimumCrop) is out of range: 0.1 to 1 of the frame's width"
        }
        return nil
    }
}

/// One camera's auto-framing, pure: faces come in from the detection thread (`observe`), each
/// frame asks where the crop is (`advance`). The crop aims at the faces' box with its margin,
/// at the frame's aspect, no smaller than the settings allow; it starts moving only once the
/// aim has stood off the crop for the hold time (or the faces left it), then moves at most the
/// maximum speed, so no frame jumps. With no face seen for the hold time it goes back to the
/// whole frame.
public struct AutoFramer: Sendable, Equatable {
    public let settings: FramingSettings
    /// The frame's width over its height: the crop keeps it, so the framed picture is undistorted.
    public let aspect: Double
    /// The crop now, in the frame's normalised coordinates.
    public private(set) var crop: NormalizedRect = .whole
    /// Where it is going.
    public private(set) var target: NormalizedRect = .whole
    /// The crop the faces ask for, and since when (ns) it has stood apart from the target.
    public private(set) var aim: NormalizedRect = .whole
    private var aimSince: UInt64?
    private var lastFaceAt: UInt64?
    private var lastAdvance: UInt64?

    public init(settings: FramingSettings, width: Int, height: Int) {
        self.settings = settings
        aspect = height > 0 ? Double(width) / Double(height) : 16.0 / 9.0
    }

    /// Whether the crop is in use: anything narrower than the whole frame.
    public var isFraming: Bool { crop != .whole }

    /// The faces of one examined frame, captured at `at` (ns, the capture clock), in the frame's
    /// normalised coordinates; none: no face in it.
    public mutating func observe(faces: [NormalizedRect], at time: UInt64) {
        guard !faces.isEmpty else {
            // A face the detector misses for a frame or two keeps its framing; gone for the
            // hold time, the crop heads back to the whole frame.
            if let last = lastFaceAt, time >= last, Self.seconds(time - last) < settings.holdSeconds { return }
            aim = .whole
            aimSince = nil
            target = .whole
            return
        }
        lastFaceAt = time
        settle(framing(faces), at: time)
    }

    /// Starts the hold for a new aim, or makes the aim the target once held long enough; an aim
    /// the target already serves ends the hold.
    private mutating func settle(_ wanted: NormalizedRect, at time: UInt64) {
        aim = wanted
        guard !serves(target, wanted) else {
            aimSince = nil
            return
        }
        let since = aimSince ?? time
        aimSince = since
        if Self.seconds(time &- since) >= settings.holdSeconds { target = wanted }
    }

    /// Whether `target` does for `wanted`: their centres within a tenth of the target's width
    /// (the dead zone: the margin keeps the faces inside), and the target neither much smaller
    /// nor more than a quarter larger.
    private func serves(_ target: NormalizedRect, _ wanted: NormalizedRect) -> Bool {
        let zone = 0.1 * target.width + 1e-9
        let dx = abs((target.x + target.width / 2) - (wanted.x + wanted.width / 2))
        let dy = abs((target.y + target.height / 2) - (wanted.y + wanted.height / 2))
        return dx <= zone && dy <= zone && target.width >= wanted.width * 0.9 - 1e-9 && target.width <= wanted.width * 1.25 + 1e-9
    }

    /// The crop of the frame's aspect that holds `faces` with their margin, clamped to the frame.
    func framing(_ faces: [NormalizedRect]) -> NormalizedRect {
        let left = faces.map(\.x).min()!, top = faces.map(\.y).min()!
        let right = faces.map { $0.x + $0.width }.max()!, bottom = faces.map { $0.y + $0.height }.max()!
        let pad = settings.margin * (bottom - top)
        // Heights are fractions of the frame's height: a crop of width w is w tall too, in
        // normalised terms, when it keeps the frame's aspect.
        // The margin is of the faces' height on every side: across, in frame widths, that is
        // pad / aspect.
        let width = min(max(right - left + 2 * pad / aspect, bottom - top + 2 * pad, settings.minimumCrop), 1)
        let height = width
        let centreX = (left + right) / 2, centreY = (top + bottom) / 2
        let x = min(max(centreX - width / 2, 0), 1 - width)
        let y = min(max(centreY - height / 2, 0), 1 - height)
        return NormalizedRect(x: x, y: y, width: width, height: height)
    }

    /// The crop for a frame captured at `at` (ns): the last one moved towards the target by at
    /// most the maximum speed for the time since the frame before.
    public mutating func advance(to time: UInt64) -> NormalizedRect {
        defer { lastAdvance = time }
        guard let last = lastAdvance, time > last else { return crop }
        let step = settings.maximumSpeed * Self.seconds(time - last)
        func toward(_ from: Double, _ to: Double) -> Double { from + min(max(to - from, -step), step) }
        // The size first, then the centre, each by at most `step`; kept inside the frame.
        let width = toward(crop.width, target.width)
        let centreX = toward(crop.x + crop.width / 2, target.x + target.width / 2)
        let centreY = toward(crop.y + crop.height / 2, target.y + target.height / 2)
        let x = min(max(centreX - width / 2, 0), 1 - width), y = min(max(centreY - width / 2, 0), 1 - width)
        crop = NormalizedRect(x: x, y: y, width: width, height: width)
        if abs(crop.width - 1) < 1e-9 { crop = .whole }
        return crop
    }

    static func seconds(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1e9 }
}

/// Who decides whether cameras auto-frame (detection.md, "Who decides"), as the seed's Center
/// Stage control modes do: operators camera by camera (`capfleet detect --framing`), the fleet's
/// policy for every camera (`framing_policy` in coordinator.conf), or both, an operator's choice
/// for a camera winning over the policy's.
public struct FramingPolicy: Sendable, Equatable {
    public enum Control: String, Sendable, CaseIterable {
        /// Operators decide, camera by camera; the policy is not used.
        case `operator`
        /// The policy decides for every camera; operators' framing requests are refused.
        case policy
        /// The policy frames every camera an operator has not set detection for.
        case cooperative
    }

    public var control: Control
    /// The fleet's framing, or nil: the policy frames no camera.
    public var framing: FramingSettings?

    public static let operatorControlled = FramingPolicy(control: .operator, framing: nil)

    public init(control: Control, framing: FramingSettings?) {
        self.control = control
        self.framing = framing
    }

    /// What a camera's agent is told to look for: the operator's settings as stored (nil: never
    /// set), with framing as the control says; nil: nothing.
    public func effective(_ stored: DetectionSettings?) -> DetectionSettings? {
        var settings: DetectionSettings
        switch control {
        case .operator:
            return stored
        case .cooperative:
            if let stored { return stored }
            guard let framing else { return nil }
            settings = .off
            settings.framing = framing
        case .policy:
            settings = stored ?? .off
            settings.framing = framing
        }
        if settings.framing != nil { settings.faces = true }
        return settings.isOn || settings.framing != nil ? settings : nil
    }

    /// Why an operator's request cannot set framing here, or nil.
    public func refusal(of requested: DetectionSettings) -> String? {
        guard control == .policy, requested.framing != nil else { return nil }
        return
            "auto-framing is the fleet's policy here (framing_control = policy in coordinator.conf, framing_policy = \(framing == nil ? "off" : "on")): ask without --framing, or set framing_control = cooperative or operator"
    }
}
