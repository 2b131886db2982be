import FleetProtocol
import Foundation

/// What an operator knows of a device's lens that its driver does not say: V4L2 reports
/// neither a field of view nor a minimum focus distance. Nil = not known.
public struct DeviceOptics: Hashable, Sendable {
    /// Horizontal, degrees, at zoom 1: used for formats that do not report their own.
    public var fieldOfViewDegrees: Double?
    /// The nearest subject the lens focuses on, mm: wins over what the device reports.
    public var minimumFocusDistanceMillimetres: Double?

    public init(fieldOfViewDegrees: Double? = nil, minimumFocusDistanceMillimetres: Double? = nil) {
        self.fieldOfViewDegrees = fieldOfViewDegrees
        self.minimumFocusDistanceMillimetres = minimumFocusDistanceMillimetres
    }

    public var isEmpty: Bool { fieldOfViewDegrees == nil && minimumFocusDistanceMillimetres == nil }

    /// Why these values cannot describe a lens, or nil.
    public var problem: String? {
        if let fov = fieldOfViewDegrees, !(fov > 0 && fov < 180) { return "a field of view must be between 0 and 180 degrees, not \(fov)" }
        if let near = minimumFocusDistanceMillimetres, !(near > 0 && near.isFinite) {
            return "a minimum focus distance must be a positive number of millimetres, not \(near)"
        }
        return nil
    }
}

/// The zoom at which a code of a given size, held at the lens's minimum focus distance, fills
/// a given share of the frame's width: the seed of a barcode scanner's set-up, as camera APIs'
/// code-scanning samples compute it. Closer than the minimum focus distance the code blurs; at
/// zoom 1 it may be too small to read there, so the zoom makes up the difference.
///
/// Geometry: at distance d a frame of horizontal field of view θ is 2·d·tan(θ/2) wide, and
/// zoom z (a crop or optical zoom) narrows it by z. A code of width c fills share s when
/// 2·d·tan(θ/2)/z = c/s.
public struct ScanSetup: Hashable, Sendable {
    public enum Source: String, Sendable {
        case format = "the active format"
        case optics = "the device's optics setting"
        case focusRange = "the focus range's near limit"
        case regionOfInterest = "the detection region's width"
        case defaultShare = "the default"
        case given = "given"
    }

    /// A scan set-up that cannot be computed, and what would make it possible.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case badCodeSize(Double)
        case badFill(Double)
        case unknownFieldOfView(deviceID: String)
        case unknownMinimumFocusDistance(deviceID: String)

        public var description: String {
            switch self {
            case .badCodeSize(let size): "the code's size must be a positive number of millimetres, not \(size)"
            case .badFill(let fill): "the share of the frame the code fills must be above 0 and at most 1, not \(fill)"
            case .unknownFieldOfView(let id):
                "\(id)'s active format has no field of view and none is recorded for it: record its lens's with capfleet optics \(id) --fov DEGREES"
            case .unknownMinimumFocusDistance(let id):
                "\(id) does not say how near it focuses and nothing is recorded for it: record it with capfleet optics \(id) --min-focus-mm MM"
            }
        }
    }

    /// A QR code's smallest version is 21 modules wide; ZBar rarely reads under 2 pixels a module.
    public static let minimumReadablePixels = 42.0
    /// The share of the frame's width a code fills when nothing else is said: a quarter leaves
    /// room to aim, and is what hand-held scanning samples use.
    public static let defaultFill = 0.25

    public var codeMillimetres: Double
    public var fill: Double
    public var fillSource: Source
    public var fieldOfViewDegrees: Double
    public var fieldOfViewSource: Source
    public var minimumFocusMillimetres: Double
    public var minimumFocusSource: Source
    /// How far away the code fills `fill` of the frame at zoom 1, mm.
    public var distanceAtZoomOneMillimetres: Double
    /// The recommended zoom: 1 when the lens focuses close enough without one.
    public var zoomFactor: Double
    /// The zoom the geometry asks for, before the format's limit.
    public var neededZoomFactor: Double
    public var maxZoomFactor: Double
    /// Where to hold the code, mm: the minimum focus distance, or farther when zoom 1 suffices.
    public var workingDistanceMillimetres: Double
    /// The share the code fills at the recommended zoom and the working distance (less
    /// than `fill` when the format's zoom limit cut the zoom).
    public var achievedFill: Double
    /// The code's width in the frame's pixels at the recommended zoom.
    public var codePixels: Double

    public var isLimitedByMaxZoom: Bool { neededZoomFactor > maxZoomFactor * (1 + 1e-9) }
    public var isReadable: Bool { codePixels >= Self.minimumReadablePixels }

    /// - Parameters:
    ///   - fill: nil = the detection region's width where one narrower than the frame is set
    ///     (the code should fill what is scanned), else `defaultFill`.
    public init(
        deviceID: String, codeMillimetres: Double, fill: Double?, activeFormat: VideoFormat, focus: FocusCapabilities,
        optics: DeviceOptics, detectionRegion: NormalizedRect?
    ) throws(Failure) {
        guard codeMillimetres > 0, codeMillimetres.isFinite else { throw .badCodeSize(codeMillimetres) }
        if let fill {
            guard fill > 0, fill <= 1 else { throw .badFill(fill) }
            self.fill = fill
            fillSource = .given
        } else if let region = detectionRegion, region.width < 1 {
            self.fill = region.width
            fillSource = .regionOfInterest
        } else {
            self.fill = Self.defaultFill
            fillSource = .defaultShare
        }
        if let fov = activeFormat.fieldOfViewDegrees, fov > 0 {
            (fieldOfViewDegrees, fieldOfViewSource) = (fov, .format)
        } else if let fov = optics.fieldOfViewDegrees {
            (fieldOfViewDegrees, fieldOfViewSource) = (fov, .optics)
        } else {
            throw .unknownFieldOfView(deviceID: deviceID)
        }
        if let near = optics.minimumFocusDistanceMillimetres {
            (minimumFocusMillimetres, minimumFocusSource) = (near, .optics)
        } else if let near = focus.minimumFocusDistanceMillimetres {
            (minimumFocusMillimetres, minimumFocusSource) = (near, .focusRange)
        } else {
            throw .unknownMinimumFocusDistance(deviceID: deviceID)
        }
        self.codeMillimetres = codeMillimetres
        let halfAngle = fieldOfViewDegrees / 2 * .pi / 180
        distanceAtZoomOneMillimetres = codeMillimetres / self.fill / (2 * tan(halfAngle))
        neededZoomFactor = max(1, minimumFocusMillimetres / distanceAtZoomOneMillimetres)
        maxZoomFactor = max(1, activeFormat.maxZoomFactor)
        zoomFactor = min(neededZoomFactor, maxZoomFactor)
        // Where the code is held: at the minimum focus distance, or farther where the lens
        // focuses close enough that zoom 1 already makes it fill its share.
        workingDistanceMillimetres = max(minimumFocusMillimetres, distanceAtZoomOneMillimetres)
        let frameWidth = 2 * workingDistanceMillimetres * tan(halfAngle) / zoomFactor
        achievedFill = min(1, codeMillimetres / frameWidth)
        codePixels = achievedFill * Double(activeFormat.width)
    }
}

extension DeviceOptics {
    public var wire: Capfleet_V1_DeviceOptics {
        .with {
            $0.fieldOfViewDegrees = fieldOfViewDegrees ?? 0
            $0.minimumFocusDistanceMm = minimumFocusDistanceMillimetres ?? 0
        }
    }

    /// Zero (or anything not a number) is "not known"; negative values stay, for `problem` to name.
    public init(wire: Capfleet_V1_DeviceOptics) {
        self.init(
            fieldOfViewDegrees: wire.fieldOfViewDegrees != 0 ? wire.fieldOfViewDegrees : nil,
            minimumFocusDistanceMillimetres: wire.minimumFocusDistanceMm != 0 ? wire.minimumFocusDistanceMm : nil)
    }

    /// For the audit log and the CLI: "field of view 70°, focuses from 150 mm", or "nothing known".
    public var summary: String {
        let parts = [
            fieldOfViewDegrees.map { "field of view \(VideoFormat.trim($0))°" },
            minimumFocusDistanceMillimetres.map { "focuses from \(VideoFormat.trim($0)) mm" },
        ].compactMap { $0 }
        return parts.isEmpty ? "nothing known" : parts.joined(separator: ", ")
    }
}
