import FleetCore

/// What went wrong with a camera, phrased for the operator who has to fix it. A failed call
/// on the device keeps its `V4L2Error` (errno and all): callers ask `isBusy` or
/// `isDisconnect`, and the description derives from it.
public enum CaptureError: Error, CustomStringConvertible, Sendable {
    case unsupportedFormat(device: String, requested: String, supported: [String])
    case unsupportedFrameRate(device: String, requested: Double, format: String)
    /// A call on the device node failed.
    case deviceFailed(device: String, V4L2Error)
    /// No capture device with the device's stable id is present (unplugged).
    case notPresent(device: String, lastPath: String)
    /// The device is interrupted (unplugged, busy, failing): it takes no commands until it is back.
    case interrupted(device: String, path: String, Interruption)
    case alreadyStreaming(device: String)
    case unsupportedZoom(device: String, requested: Double, maximum: Double)
    case unsupportedZoomRamp(device: String, requested: Double)
    case unsupportedFocus(device: String, requested: [String], available: String)
    case unsupportedFrameDurationRange(device: String, reason: String)
    /// The device has no exposure control, or not the one asked for (manual time out of
    /// range, no automatic mode).
    case unsupportedExposure(device: String, reason: String)
    /// The stream cannot be started again at a chosen instant (not streaming, or a source
    /// whose starts do not move its frames).
    case unsupportedTimedStart(device: String, reason: String)
    /// The camera would not go into (or out of) trigger mode, or would not take a trigger.
    case triggerFailed(device: String, reason: String)
    /// The device has no such control, or would not take that value.
    case controlRefused(device: String, control: String, reason: String)
    /// The camera has no region of interest, or the window would not fit where asked.
    case regionRefused(device: String, reason: String)

    /// Another program holds the device.
    public var isBusy: Bool {
        if case let .deviceFailed(_, error) = self { return error.isBusy }
        return false
    }

    /// The device is gone (unplugged, or its driver unbound it).
    public var isDisconnect: Bool {
        switch self {
        case let .deviceFailed(_, error): error.isDisconnect
        case .notPresent: true
        default: false
        }
    }

    /// The device cannot be used now, though nothing is wrong with the request: it may be
    /// tried again once the device is back.
    public var isUnavailable: Bool {
        if case .interrupted = self { return true }
        return isBusy || isDisconnect
    }

    public var description: String {
        switch self {
        case let .unsupportedFormat(device, requested, supported):
            "device \(device) does not support \(requested); supported formats: \(supported.joined(separator: "; "))"
        case let .unsupportedFrameRate(device, requested, format):
            "device \(device) cannot run \(format) at \(requested) fps; choose a rate within the format's ranges"
        case let .deviceFailed(device, error) where error.isBusy || error.isDisconnect:
            "device \(device) (\(error.path)) is unavailable: \(error)"
        case let .deviceFailed(device, error):
            "device \(device): \(error)"
        case let .notPresent(device, lastPath):
            "device \(device) (\(lastPath)) is unavailable: no capture device with this id is present; waiting for it to come back"
        case let .interrupted(device, path, interruption):
            "device \(device) (\(path)) is unavailable: capture is interrupted (\(interruption.reason.rawValue)): \(interruption.message)"
        case let .unsupportedZoom(device, requested, maximum):
            "device \(device) cannot zoom to \(requested)x; its active format zooms from 1x to \(maximum)x"
        case let .unsupportedZoomRamp(device, requested):
            "device \(device) cannot ramp its zoom at \(VideoFormat.trim(requested)) powers of two per second; a ramp runs at up to \(VideoFormat.trim(DeviceCommandRules.fastestZoomRamp)) (0 jumps)"
        case let .unsupportedFocus(device, requested, available):
            "device \(device) does not support \(requested.joined(separator: ", ")); its focus offers: \(available)"
        case let .unsupportedFrameDurationRange(device, reason):
            "device \(device) cannot take that frame duration range: \(reason)"
        case let .unsupportedExposure(device, reason):
            "device \(device) cannot take that exposure: \(reason)"
        case let .alreadyStreaming(device):
            "device \(device) is already streaming; stop it first"
        case let .unsupportedTimedStart(device, reason):
            "device \(device) cannot start its stream at a chosen instant: \(reason)"
        case let .triggerFailed(device, reason):
            "device \(device) cannot be triggered: \(reason)"
        case let .controlRefused(device, control, reason):
            "device \(device) did not take control \(control): \(reason)"
        case let .regionRefused(device, reason):
            "device \(device) cannot place its region of interest: \(reason)"
        }
    }
}

/// The layout of the pixels in one captured frame.
public struct FrameLayout: Hashable, Sendable {
    public var pixelFormat: PixelFormat
    public var width: Int
    public var height: Int
    public var bytesPerLine: Int
    /// The format's significant bits per sample, colour description and depth unit, which
    /// every frame's header carries (frames.md, "Colour and depth").
    public var bitDepth: Int
    public var colour: ColourDescription?
    public var depthUnitMetres: Double?

    public init(
        pixelFormat: PixelFormat, width: Int, height: Int, bytesPerLine: Int, bitDepth: Int = 8, colour: ColourDescription? = nil,
        depthUnitMetres: Double? = nil
    ) {
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
        self.bytesPerLine = bytesPerLine
        self.bitDepth = bitDepth
        self.colour = colour
        self.depthUnitMetres = depthUnitMetres
    }

    public init(_ format: VideoFormat) {
        self.init(
            pixelFormat: format.pixelFormat, width: format.width, height: format.height,
            bytesPerLine: format.pixelFormat.bytesPerLine(width: format.width), bitDepth: format.bitDepth, colour: format.colour,
            depthUnitMetres: format.depthUnitMetres)
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
    /// The camera's own timestamp of the frame, in its own clock (a GenICam camera's); 0 when it has none.
    public let deviceTimestamp: UInt64
    /// Where its pan and tilt pointed it for this frame (arc-seconds; `OpticalView`): 0 for a
    /// camera without them.
    public let pan: Int64
    public let tilt: Int64

    public init(
        buffer: FrameBuffer, byteCount: Int, sequence: UInt64, captureMonotonicNanoseconds: UInt64, layout: FrameLayout,
        zoomFactor: Double = 1, deviceTimestamp: UInt64 = 0, pan: Int64 = 0, tilt: Int64 = 0
    ) {
        self.pan = pan
        self.tilt = tilt
        self.buffer = buffer
        self.byteCount = byteCount
        self.sequence = sequence
        self.captureMonotonicNanoseconds = captureMonotonicNanoseconds
        self.layout = layout
        self.zoomFactor = zoomFactor
        self.deviceTimestamp = deviceTimestamp
    }
}

/// A camera the agent can stream from: the synthetic test pattern or a V4L2 device.
/// Sources deliver frames on a thread they own; `deliver` must not block for long.
public protocol CameraSource: AnyObject, Sendable {
    var device: DeviceDescription { get }
    var activeFormatIndex: Int { get }
    /// The active frame rates: max is 1 / minimum frame duration (the rate it runs at),
    /// min is 1 / maximum frame duration (how far it may slow down, e.g. for exposure).
    var activeFrameRateRange: FrameRateRange { get }
    /// Frames the source had to skip because every buffer was still in use downstream.
    var outOfBufferDrops: UInt64 { get }
    /// Why the source is not delivering frames now, or nil while it is (or is stopped on purpose).
    var interruption: Interruption? { get }

    /// Starts capturing. `onInterruption` is called on the source's thread when an
    /// interruption begins (with it) and when capture resumes by itself (with nil).
    func start(
        deliver: @escaping @Sendable (CapturedFrame) -> Void,
        onInterruption: @escaping @Sendable (Interruption?) -> Void) throws(CaptureError)
    func stop()
    /// Takes the format; a zoom ramp under way is cancelled and the factor clamped to the new
    /// format's range (`ZoomRamp.adopting`), and the returned change says so (nil: the zoom
    /// was left as it was).
    @discardableResult
    func setActiveFormat(index: Int) throws(CaptureError) -> ZoomFormatChange?
    /// Sets the minimum and maximum frame duration, given as the rates they allow.
    func setFrameRateRange(_ range: FrameRateRange) throws(CaptureError)

    /// How this source zooms; nil when it cannot.
    var zoomMethod: ZoomMethod? { get }
    var zoomFactor: Double { get }
    /// Applied frame by frame from the next frame on.
    func zoom(_ command: ZoomCommand) throws(CaptureError)

    /// Where focus is now; nil for devices without focus.
    var focus: FocusState? { get }
    func focus(_ request: FocusRequest) throws(CaptureError)

    /// Exposure now and the range it can be set in; nil for devices without exposure control.
    var exposure: ExposureState? { get }
    /// Sets automatic exposure, or a manual exposure time within `exposure`'s range; it takes
    /// effect from the next frame the device exposes (a driver may need a frame or two).
    func setExposure(_ request: ExposureRequest) throws(CaptureError)

    /// How a steering loop can time this source's frames, line by line (a sensor's VBLANK);
    /// nil when its driver times them and nothing here can move them (UVC webcams, vivid).
    var frameLengthTiming: FrameLengthTiming? { get }
    /// Sets the frame length, in lines, from the next frame the sensor starts (clamped into
    /// `frameLengthTiming`'s range). Called on the capture thread: quick, never blocking.
    func setFrameLength(lines: Int)
    /// Why it cannot be steered, for its alignment report ("free-running: ..."); empty while it can.
    var steeringUnavailableReason: String { get }
    /// A network camera's stream as its transport counts it; nil for other sources.
    var streamTransport: StreamTransportFigures? { get }

    /// When its stream last started (STREAMON called), CLOCK_MONOTONIC ns; 0 when it cannot
    /// tell. A free-running source's frames keep the phase its start gave them.
    var streamStartMonotonic: UInt64 { get }
    /// Stops the stream and starts it again with STREAMON at `monotonic` ns (a free-running
    /// source's one lever on its phase: `FreeRunStart`). Waits for that instant: called on
    /// the device's thread, with the instant at most about a frame interval ahead.
    func restartStream(streamOnAt monotonic: UInt64) throws(CaptureError)

    /// A camera that starts an exposure on a trigger sent to it (GenICam TriggerSoftware);
    /// nil when it only free-runs.
    var softwareTrigger: (any SoftwareTrigger)? { get }

    /// A camera with I/O lines it can be triggered on or drive (GenICam's digital I/O); nil
    /// when it has none.
    var triggerLines: (any TriggerLines)? { get }

    /// Sets one of `device.controls` (by id) to `value`, and reads it back. Blocking: a
    /// driver call or a register write on the camera.
    func setControl(id: UInt32, value: Int64) throws(CaptureError) -> DeviceControl

    /// The window of its sensor the active format reads (a GenICam region of interest), in
    /// the format's pixels; nil for sources whose formats are not windows of a sensor.
    var region: PixelRectangle? { get }
    /// Moves that window; the stream restarts with it. Blocking: register writes on the camera.
    func setRegion(_ placement: SensorRegion.Placement) throws(CaptureError) -> PixelRectangle
}

/// A camera's software trigger (proto-docs/clock.md, "Triggered cameras"): the agent puts
/// the camera in trigger mode and fires at each slot of the fleet's grid from a thread of
/// its own.
public protocol SoftwareTrigger: Sendable {
    /// Trigger mode on (each frame waits for a trigger) or off (free-running again at its
    /// frame rate), and how triggers are to reach it. Blocking: a few register writes.
    @discardableResult
    func setTriggerMode(_ on: Bool) throws(CaptureError) -> TriggerDelivery
    /// How `setTriggerMode(true)` would have triggers reach the camera now (its PTP state and
    /// clock as last seen): when it differs from the mode set, the trigger thread sets it again.
    var deliveryNow: TriggerDelivery { get }
    /// Starts one exposure: now (`.software`), or at `dueMonotonic` (CLOCK_MONOTONIC ns) by a
    /// command sent ahead (`.scheduledAction`). Blocking (a register write, acknowledged, or
    /// one datagram): called from the trigger thread only.
    func fire(dueMonotonic: UInt64) throws(CaptureError)
}

/// How a triggered camera's exposures are started (proto-docs/clock.md, "Triggered cameras"
/// and "Scheduled action commands").
public enum TriggerDelivery: Sendable, Equatable {
    /// A software trigger at each slot's instant; `actionUnavailable`: why a camera that takes
    /// scheduled action commands is not sent them (empty otherwise).
    case software(actionUnavailable: String)
    /// A scheduled action command sent `lead` ns ahead of each slot with the slot's time in
    /// the camera's PTP clock: the camera exposes at that time whatever the command's delay.
    case scheduledAction(lead: UInt64)
    /// The edges of input `line`, driven by the camera `sourceDeviceID` (empty: an external
    /// generator); the agent sends nothing.
    case hardwareLine(line: String, sourceDeviceID: String)
}

/// A camera's I/O lines (proto-docs/clock.md, "Hardware-line triggers"): FrameStart on an
/// input line's edges, and an output line carrying its exposure signal to others' inputs.
public protocol TriggerLines: Sendable {
    /// Expose on `line`'s edges (FrameStart from that line), or, nil, run free again at its
    /// frame rate. Blocking: a few register writes.
    func setLineTrigger(_ line: String?) throws(CaptureError)
    /// Drive `line` with the exposure signal (ExposureActive), or, nil, stop driving the line
    /// it drove. Blocking: a few register writes.
    func setExposureOutput(_ line: String?) throws(CaptureError)
}

extension TriggerDelivery: CustomStringConvertible {
    public var isScheduled: Bool {
        if case .scheduledAction = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case let .software(actionUnavailable):
            actionUnavailable.isEmpty
                ? "software trigger on the grid" : "software trigger on the grid (no scheduled action commands: \(actionUnavailable))"
        case let .scheduledAction(lead):
            "scheduled action commands on the grid, sent \(lead / 1_000_000) ms ahead"
        case let .hardwareLine(line, source):
            "the edges of \(line), driven by \(source.isEmpty ? "an external generator" : source)"
        }
    }
}

/// How a steerable source's frames are timed as it runs now: a frame lasts its length in
/// lines of a line time, which its pixel clock nominally gives (the real one is off by its
/// oscillator's error, which a loop steering it learns).
public struct FrameLengthTiming: Sendable, Equatable {
    /// Nanoseconds a line lasts on a perfect pixel clock (PIXEL_RATE and HBLANK).
    public var nominalLineTime: Double
    /// The frame lengths the vertical blanking allows.
    public var frameLengthRange: ClosedRange<Int>
    /// The length the active frame rate gives, where the source starts each change of rate or format.
    public var nominalFrameLength: Int

    public init(nominalLineTime: Double, frameLengthRange: ClosedRange<Int>, nominalFrameLength: Int) {
        self.nominalLineTime = nominalLineTime
        self.frameLengthRange = frameLengthRange
        self.nominalFrameLength = nominalFrameLength
    }
}

extension CameraSource {
    public var activeFrameRate: Double { activeFrameRateRange.maxFramesPerSecond }

    /// Most sources have no exposure control.
    public var exposure: ExposureState? { nil }

    public func setExposure(_ request: ExposureRequest) throws(CaptureError) {
        throw .unsupportedExposure(device: device.deviceID, reason: "it has no exposure control")
    }

    /// Refuses an exposure request the device cannot do, saying what it can.
    public func checkExposure(_ request: ExposureRequest, against state: ExposureState?) throws(CaptureError) {
        guard let state else { throw .unsupportedExposure(device: device.deviceID, reason: "it has no exposure control") }
        if let refusal = state.refusal(of: request) { throw .unsupportedExposure(device: device.deviceID, reason: refusal) }
    }

    /// Sources without controls refuse every one.
    public func setControl(id: UInt32, value: Int64) throws(CaptureError) -> DeviceControl {
        throw .controlRefused(device: device.deviceID, control: DeviceControl.hexadecimal(id), reason: "it has no controls")
    }

    /// Most sources read their whole sensor, or crop only through zoom.
    public var region: PixelRectangle? { nil }
    public func setRegion(_ placement: SensorRegion.Placement) throws(CaptureError) -> PixelRectangle {
        throw .regionRefused(
            device: device.deviceID,
            reason: "it has no region of interest (GenICam cameras have one; a V4L2 camera crops through zoom: capfleet zoom)")
    }

    /// Most sources are timed by their driver.
    public var frameLengthTiming: FrameLengthTiming? { nil }
    /// Only network cameras count their stream's transport.
    public var streamTransport: StreamTransportFigures? { nil }
    public var streamStartMonotonic: UInt64 { 0 }
    public func restartStream(streamOnAt monotonic: UInt64) throws(CaptureError) {
        throw .unsupportedTimedStart(device: device.deviceID, reason: "its frames are not timed by its stream's start")
    }
    public func setFrameLength(lines: Int) {}
    /// Most sources cannot be triggered.
    public var softwareTrigger: (any SoftwareTrigger)? { nil }
    public var triggerLines: (any TriggerLines)? { nil }
    public var steeringUnavailableReason: String {
        frameLengthTiming == nil ? "free-running: the source's driver times its frames, and nothing here can move them" : ""
    }

    /// A fixed rate: minimum and maximum frame duration equal.
    public func setFrameRate(_ framesPerSecond: Double) throws(CaptureError) {
        try setFrameRateRange(FrameRateRange(min: framesPerSecond, max: framesPerSecond))
    }

    public func start(deliver: @escaping @Sendable (CapturedFrame) -> Void) throws(CaptureError) {
        try start(deliver: deliver, onInterruption: { _ in })
    }

    /// Refuses a focus request the device cannot do as a whole, naming what it has.
    public func checkFocus(_ request: FocusRequest) throws(CaptureError) {
        let problems = request.problems(on: device.focus)
        guard problems.isEmpty else {
            throw .unsupportedFocus(device: device.deviceID, requested: problems, available: device.focus.summary)
        }
    }

    /// Refuses a frame rate range the active format cannot run (DeviceCommandRules).
    public func checkFrameRateRange(_ range: FrameRateRange) throws(CaptureError) {
        let format = device.formats[activeFormatIndex]
        switch DeviceCommandRules.frameRateFit(minimum: range.minFramesPerSecond, maximum: range.maxFramesPerSecond, in: format) {
        case .fits:
            return
        case .inverted:
            throw .unsupportedFrameDurationRange(device: device.deviceID, reason: "the minimum rate must be positive and at most the maximum")
        case let .outside(fps):
            throw .unsupportedFrameRate(device: device.deviceID, requested: fps, format: format.label)
        }
    }

    /// Refuses a zoom outside the active format's range, or a ramp faster than any may run
    /// (DeviceCommandRules: the coordinator checks the same before it sends the command).
    public func checkZoom(_ command: ZoomCommand, maximum: Double) throws(CaptureError) {
        switch command {
        case let .set(factor), let .ramp(factor, _):
            guard DeviceCommandRules.zoomFits(factor, maximum: maximum) else {
                throw .unsupportedZoom(device: device.deviceID, requested: factor, maximum: maximum)
            }
            if case let .ramp(_, rate) = command, !DeviceCommandRules.rampRateFits(rate) {
                throw .unsupportedZoomRamp(device: device.deviceID, requested: rate)
            }
        case .cancel:
            break
        }
    }

    /// Refuses a format index the device does not have.
    public func checkFormat(_ index: Int) throws(CaptureError) {
        guard DeviceCommandRules.formatFits(index, of: device.formats) else {
            throw .unsupportedFormat(device: device.deviceID, requested: "format #\(index)", supported: device.formats.map(\.label))
        }
    }
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
