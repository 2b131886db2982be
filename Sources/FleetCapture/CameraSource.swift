import FleetCore

/// What went wrong with a camera, phrased for the operator who has to fix it.
public enum CaptureError: Error, CustomStringConvertible, Sendable {
    case unsupportedFormat(device: String, requested: String, supported: [String])
    case unsupportedFrameRate(device: String, requested: Double, format: String)
    case deviceUnavailable(device: String, path: String, reason: String)
    case ioctlFailed(device: String, call: String, errno: Int32)
    case alreadyStreaming(device: String)
    case unsupportedZoom(device: String, requested: Double, maximum: Double)

    public var description: String {
        switch self {
        case let .unsupportedFormat(device, requested, supported):
            "device \(device) does not support \(requested); supported formats: \(supported.joined(separator: "; "))"
        case let .unsupportedFrameRate(device, requested, format):
            "device \(device) cannot run \(format) at \(requested) fps; choose a rate within the format's ranges"
        case let .deviceUnavailable(device, path, reason):
            "device \(device) (\(path)) is unavailable: \(reason)"
        case let .ioctlFailed(device, call, errno):
            "\(call) failed on device \(device): errno \(errno)"
        case let .unsupportedZoom(device, requested, maximum):
            "device \(device) cannot zoom to \(requested)x; its active format zooms from 1x to \(maximum)x"
        case let .alreadyStreaming(device):
            "device \(device) is already streaming; stop it first"
        }
    }
}

/// The layout of the pixels in one captured frame.
public struct FrameLayout: Hashable, Sendable {
    public var pixelFormat: PixelFormat
    public var width: Int
    public var height: Int
    public var bytesPerLine: Int

    public init(pixelFormat: PixelFormat, width: Int, height: Int, bytesPerLine: Int) {
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
        self.bytesPerLine = bytesPerLine
    }

    public init(_ format: VideoFormat) {
        self.init(pixelFormat: format.pixelFormat, width: format.width, height: format.height,
                  bytesPerLine: format.pixelFormat.bytesPerLine(width: format.width))
    }
}

/// One frame as the source produced it. The pixels live in `buffer`, which returns to
/// the source's pool when the last reference (often libzmq's, after sending) goes away.
public struct CapturedFrame: Sendable {
    public let buffer: FrameBuffer
    public let byteCount: Int
    /// The source's own sequence number; gaps mean frames lost before delivery.
    public let sequence: UInt64
    /// When the source captured the frame, on CLOCK_MONOTONIC, never the time of publishing.
    public let captureMonotonicNanoseconds: UInt64
    public let layout: FrameLayout
    /// The zoom factor applied to this frame (1 = none).
    public let zoomFactor: Double

    public init(buffer: FrameBuffer, byteCount: Int, sequence: UInt64, captureMonotonicNanoseconds: UInt64, layout: FrameLayout,
                zoomFactor: Double = 1) {
        self.buffer = buffer
        self.byteCount = byteCount
        self.sequence = sequence
        self.captureMonotonicNanoseconds = captureMonotonicNanoseconds
        self.layout = layout
        self.zoomFactor = zoomFactor
    }
}

/// A camera the agent can stream from: the synthetic test pattern or a V4L2 device.
/// Sources deliver frames on a thread they own; `deliver` must not block for long.
public protocol CameraSource: AnyObject, Sendable {
    var device: DeviceDescription { get }
    var activeFormatIndex: Int { get }
    var activeFrameRate: Double { get }
    /// Frames the source had to skip because every buffer was still in use downstream.
    var outOfBufferDrops: UInt64 { get }

    func start(deliver: @escaping @Sendable (CapturedFrame) -> Void) throws(CaptureError)
    func stop()
    func setActiveFormat(index: Int) throws(CaptureError)
    func setFrameRate(_ framesPerSecond: Double) throws(CaptureError)

    /// How this source zooms; nil when it cannot.
    var zoomMethod: ZoomMethod? { get }
    var zoomFactor: Double { get }
    /// Applied frame by frame from the next frame on.
    func zoom(_ command: ZoomCommand) throws(CaptureError)
}

/// How a source zooms, in order of preference.
public enum ZoomMethod: String, Sendable {
    /// The device's own zoom control (V4L2_CID_ZOOM_*), or the synthetic sensor's crop.
    case deviceControl = "device_control"
    /// The driver's crop selection (VIDIOC_S_SELECTION).
    case cropSelection = "crop_selection"
    /// A centred crop and scale done by the agent.
    case agentCrop = "agent_crop"
}

public enum ZoomCommand: Sendable, Equatable {
    case set(Double)
    /// Ramp to a factor at a rate in powers of two per second.
    case ramp(to: Double, rate: Double)
    case cancel
}
