import Foundation

/// Where a camera's own zoom, pan and tilt point it, as a window of its whole view (detection.md,
/// "Framing with the camera's optics"): a pinhole camera of a known horizontal field of view,
/// panned and tilted by angles in arc-seconds (V4L2's PAN_ABSOLUTE and TILT_ABSOLUTE units) and
/// zoomed by a factor. The window keeps the frame's aspect and stays inside the whole view, as a
/// webcam's pan and tilt of a zoomed sensor do; pure, so the synthetic camera draws what it
/// shows and auto-framing aims it with the same arithmetic.
public struct OpticalView: Sendable, Equatable {
    /// The whole view's width over its height (the active format's).
    public let aspect: Double
    public let maximumZoom: Double
    /// tan of half the horizontal and vertical fields of view at zoom 1.
    let halfWidth: Double
    let halfHeight: Double

    public static let arcSecondsPerDegree = 3600.0

    public init(horizontalFieldOfViewDegrees: Double, aspect: Double, maximumZoom: Double) {
        self.aspect = aspect > 0 ? aspect : 16.0 / 9.0
        self.maximumZoom = max(maximumZoom, 1)
        halfWidth = tan(horizontalFieldOfViewDegrees / 2 * .pi / 180)
        halfHeight = halfWidth / self.aspect
    }

    /// The window of the whole view the camera shows at `zoom`, panned and tilted so (arc-seconds;
    /// tilt up is positive, as V4L2 has it): its centre where the angles point, moved back inside
    /// the view where the zoom leaves too little room.
    public func window(zoom: Double, pan: Int64, tilt: Int64) -> NormalizedRect {
        let size = 1 / min(max(zoom, 1), maximumZoom)
        let centreX = 0.5 + tan(Self.radians(pan)) / (2 * halfWidth)
        let centreY = 0.5 - tan(Self.radians(tilt)) / (2 * halfHeight)
        let x = min(max(centreX - size / 2, 0), 1 - size), y = min(max(centreY - size / 2, 0), 1 - size)
        return NormalizedRect(x: x, y: y, width: size, height: size)
    }

    /// The zoom, pan and tilt that show `window` (the frame's aspect; its width decides the zoom).
    public func pointing(showing window: NormalizedRect) -> OpticalPointing {
        let zoom = min(max(1 / max(window.width, 1e-6), 1), maximumZoom)
        let centreX = window.x + window.width / 2, centreY = window.y + window.height / 2
        let pan = atan((centreX - 0.5) * 2 * halfWidth), tilt = atan((0.5 - centreY) * 2 * halfHeight)
        return OpticalPointing(zoom: zoom, pan: Self.arcSeconds(pan), tilt: Self.arcSeconds(tilt))
    }

    /// The pan and tilt that move the window furthest at the largest zoom: beyond them the
    /// window cannot move, so a camera's controls need go no further.
    public var panLimit: Int64 { Self.arcSeconds(atan((1 - 1 / maximumZoom) * halfWidth)) }
    public var tiltLimit: Int64 { Self.arcSeconds(atan((1 - 1 / maximumZoom) * halfHeight)) }

    static func radians(_ arcSeconds: Int64) -> Double { Double(arcSeconds) / arcSecondsPerDegree * .pi / 180 }
    static func arcSeconds(_ radians: Double) -> Int64 { Int64((radians * 180 / .pi * arcSecondsPerDegree).rounded()) }
}

/// A camera's zoom factor, pan and tilt (arc-seconds).
public struct OpticalPointing: Sendable, Equatable, CustomStringConvertible {
    public var zoom: Double
    public var pan: Int64
    public var tilt: Int64

    public static let home = OpticalPointing(zoom: 1, pan: 0, tilt: 0)

    public init(zoom: Double, pan: Int64, tilt: Int64) {
        self.zoom = zoom
        self.pan = pan
        self.tilt = tilt
    }

    public var description: String {
        "zoom \(VideoFormat.trim(zoom))x, pan \(VideoFormat.trim(Double(pan) / OpticalView.arcSecondsPerDegree))°, tilt \(VideoFormat.trim(Double(tilt) / OpticalView.arcSecondsPerDegree))°"
    }
}
