/// An inclusive range of frame rates, in frames per second. A discrete rate has min == max.
public struct FrameRateRange: Hashable, Sendable, Codable {
    public var minFramesPerSecond: Double
    public var maxFramesPerSecond: Double

    public init(min: Double, max: Double) {
        minFramesPerSecond = min
        maxFramesPerSecond = max
    }

    public func contains(_ fps: Double) -> Bool {
        fps >= minFramesPerSecond - 1e-6 && fps <= maxFramesPerSecond + 1e-6
    }
}

/// One capture mode of a device: pixel format, size, the rates it can run at, and
/// what is known of its optics. This is an entry of a camera's `formats` list.
public struct VideoFormat: Hashable, Sendable {
    public var pixelFormat: PixelFormat
    public var width: Int
    public var height: Int
    public var frameRateRanges: [FrameRateRange]
    /// Horizontal field of view in degrees; nil when the driver does not say.
    public var fieldOfViewDegrees: Double?
    public var maxZoomFactor: Double
    /// Zoom factors above this one upscale; nil when unknown.
    public var upscaleThresholdZoomFactor: Double?
    public var isBinned: Bool
    /// Significant bits of each sample (a 12-bit sensor's Y16 has 12).
    public var bitDepth: Int
    /// How the samples map to light, where the source declares it.
    public var colour: ColourDescription?
    /// A depth format's (Z16) metres per unit; nil for pictures.
    public var depthUnitMetres: Double?

    public init(
        pixelFormat: PixelFormat, width: Int, height: Int, frameRateRanges: [FrameRateRange],
        fieldOfViewDegrees: Double? = nil, maxZoomFactor: Double = 1, upscaleThresholdZoomFactor: Double? = nil,
        isBinned: Bool = false, bitDepth: Int = 8, colour: ColourDescription? = nil, depthUnitMetres: Double? = nil
    ) {
        self.colour = colour
        self.depthUnitMetres = depthUnitMetres
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
        self.frameRateRanges = frameRateRanges
        self.fieldOfViewDegrees = fieldOfViewDegrees
        self.maxZoomFactor = maxZoomFactor
        self.upscaleThresholdZoomFactor = upscaleThresholdZoomFactor
        self.isBinned = isBinned
        self.bitDepth = bitDepth
    }

    public var maxFramesPerSecond: Double { frameRateRanges.map(\.maxFramesPerSecond).max() ?? 0 }

    public func supports(framesPerSecond fps: Double) -> Bool { frameRateRanges.contains { $0.contains(fps) } }

    /// Short label used in listings and errors, e.g. `1920x1080 YUYV 1-30fps`.
    public var label: String {
        let rates = frameRateRanges.map { range in
            range.minFramesPerSecond == range.maxFramesPerSecond
                ? "\(Self.trim(range.maxFramesPerSecond))"
                : "\(Self.trim(range.minFramesPerSecond))-\(Self.trim(range.maxFramesPerSecond))"
        }.joined(separator: ",")
        return "\(width)x\(height) \(pixelFormat) \(rates)fps\(isBinned ? " binned" : "")"
    }

    /// A number as people write it: 30, 29.97. Whole numbers beyond Int's range (a peer
    /// may report anything) keep Double's own spelling instead of trapping.
    public static func trim(_ value: Double) -> String {
        guard value.isFinite else { return String(value) }
        return value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String((value * 100).rounded() / 100)
    }
}

public enum SourceKind: String, Sendable, Codable, CaseIterable {
    case synthetic
    case v4l2
    /// A camera this project does not drive itself (a GigE Vision or RTSP camera, a capture
    /// card's SDK) behind a third party's agent; its id follows `DeviceIdentityRule`.
    case external
    /// A stream of samples that local processes send the agent's sensor endpoint (IMU, GPIO
    /// lines, cues; sensors.md): no formats, no frames, consent like a camera's.
    case sensor
    /// A test tone with a click on every fleet-time second (microphones.md).
    case syntheticMicrophone
    /// An ALSA capture device (microphones.md, "ALSA capture devices").
    case alsa
    /// A GigE Vision or USB3 Vision camera, through Aravis (device-model.md, "GenICam cameras").
    case genicam

    /// A camera: it has formats and takes camera commands (format, rate, zoom, focus, stills).
    public var isCamera: Bool { self != .sensor && !isMicrophone }

    public var isMicrophone: Bool { self == .syntheticMicrophone || self == .alsa }
}

/// A camera as an agent knows it: stable identity plus the full format list and what
/// the device can be told to do.
public struct DeviceDescription: Hashable, Sendable {
    /// Stable across reboots and re-plugging; never `/dev/videoN`.
    public var deviceID: String
    public var name: String
    public var driver: String
    public var kind: SourceKind
    public var formats: [VideoFormat]
    /// The driver's controls (empty for sources without any).
    public var controls: [DeviceControl]
    public var crop: CropCapabilities?
    public var focus: FocusCapabilities
    /// Where the device is now, e.g. `/dev/video0`: informational, it may change on re-plugging.
    public var devicePath: String?
    /// What the stable id was derived from: "by-id", "by-path", "bus-info" or "synthetic".
    public var identitySource: String

    public init(
        deviceID: String, name: String, driver: String, kind: SourceKind, formats: [VideoFormat],
        controls: [DeviceControl] = [], crop: CropCapabilities? = nil, focus: FocusCapabilities = .none,
        devicePath: String? = nil, identitySource: String = "synthetic"
    ) {
        self.deviceID = deviceID
        self.name = name
        self.driver = driver
        self.kind = kind
        self.formats = formats
        self.controls = controls
        self.crop = crop
        self.focus = focus
        self.devicePath = devicePath
        self.identitySource = identitySource
    }
}
