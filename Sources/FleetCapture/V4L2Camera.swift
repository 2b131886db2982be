import CV4L2
import FleetCore
import FleetSystem
import Foundation
import Logging
import Synchronization

/// A real camera through libv4l2. Streams with mmap buffers, dequeued on a thread this
/// source owns; each frame is copied into a pooled buffer (so the driver gets its buffer
/// back at once) with the driver's sequence number and monotonic capture time.
///
/// When the device goes away (ENODEV) or another program holds it (EBUSY), the source
/// reports an interruption and keeps trying; it resumes by itself, on the same stable id,
/// even if the device comes back under another /dev/videoN.
///
/// Commands block their caller for their ioctls (a format change restarts the stream): the
/// agent calls them on the device's own thread. What status reports read (`Published`)
/// never waits on an ioctl.
public final class V4L2Camera: CameraSource {
    public let device: DeviceDescription
    let zoomCapability: ZoomCapability
    /// Nil when the device has no exposure time control.
    let exposureControl: V4L2Exposure?
    let bufferCount: Int
    let devRoot: String
    let logger: Logger

    /// Everything that touches the device, under one lock: the capture thread holds it
    /// only for a non-blocking DQBUF/QBUF, commands for their few ioctls.
    struct Session {
        var path: String
        var handle: V4L2Handle?
        var stream: V4L2Stream?
        var formatIndex: Int
        var frameRateRange: FrameRateRange
        var zoom: ZoomRamp
        /// The factor the driver is set to now (control or crop), which frames carry.
        var appliedZoom = 1.0
        /// Pan and tilt (arc-seconds) as last set through `setControl`, which frames carry from
        /// then on (a driver moves them within a frame or two; it says no sooner).
        var appliedPan: Int64 = 0
        var appliedTilt: Int64 = 0
        var interruption: Interruption?
        /// The last focus request, applied again when the device comes back.
        var focusRequest: FocusRequest?
        /// Focus as last read from the device; reading it takes ioctls, so it is read on the
        /// capture thread about once a second and after every focus command, not per status.
        var focusState: FocusState?
        var focusReadAt: UInt64 = 0
        /// The last exposure request, applied again when the device comes back.
        var exposureRequest: ExposureRequest?
        /// Exposure as last read from the device, read like focus (auto exposure moves it).
        var exposureState: ExposureState?
        var exposureReadAt: UInt64 = 0
        /// Added to the driver's sequence, which restarts at every STREAMON, so the
        /// fleet sees one increasing sequence per device.
        var sequenceBase: UInt64 = 0
        var lastSequence: UInt64 = 0
        var pool: FrameBufferPool?
        /// The capture thread while the source runs.
        var captureThread: OwnedThread?
    }

    /// What readers see, copied out of the session whenever it changes: a status report
    /// never waits for a stream restart.
    struct Published: Sendable {
        var formatIndex: Int
        var frameRateRange: FrameRateRange
        var appliedZoom: Double
        var interruption: Interruption?
        var focus: FocusState?
        var exposure: ExposureState?
        var streamStartMonotonic: UInt64
    }

    let session: Mutex<Session>
    let published: Mutex<Published>
    let running = Atomic<Bool>(false)
    let outOfBuffers = Atomic<UInt64>(0)
    /// Wakes the capture thread from its poll when it is asked to stop.
    let wake: WakePipe
    /// When an interruption began, as reported.
    let wallClock: WallClock
    /// The raw sensor behind the video node, whose VBLANK steers its frames onto the fleet
    /// grid; or why there is none (a webcam, vivid: the driver times the frames).
    let sensorTiming: Result<V4L2SensorTiming, SteeringUnavailable>

    /// Opens `node` and reads its formats, controls and crop capabilities. The device
    /// stays open, so a re-plug is seen as an interruption rather than a new device.
    public init(
        node: V4L2DeviceNode, bufferCount: Int = 4, initialFormat: (width: Int, height: Int, pixelFormat: PixelFormat)? = nil,
        frameRate: Double? = nil, devRoot: String = "/dev", logger: Logger = Logger(label: "capfleet.v4l2"), wallClock: WallClock = .system
    ) throws(V4L2Error) {
        self.wallClock = wallClock
        let handle = try V4L2Handle(path: node.path)
        let controls = V4L2Controls.all(of: handle)
        let crop = V4L2Controls.crop(of: handle)
        let zoom = ZoomCapability(controls: controls, crop: crop)
        var formats = V4L2FormatEnumeration.formats(of: handle, zoom: zoom)
        if case .agent = zoom {
            // The agent can only crop raw formats it knows.
            for index in formats.indices where !CentredCropScaler.supports(formats[index].pixelFormat) {
                formats[index].maxZoomFactor = 1
                formats[index].upscaleThresholdZoomFactor = nil
            }
        }
        guard !formats.isEmpty else { throw V4L2Error(call: "VIDIOC_ENUM_FMT (no capture formats)", path: node.path, errno: EINVAL) }
        device = DeviceDescription(
            deviceID: node.deviceID, name: node.card, driver: node.driver, kind: .v4l2, formats: formats,
            controls: controls, crop: crop, focus: V4L2Controls.focusCapabilities(from: controls),
            devicePath: node.path, identitySource: node.identitySource)
        zoomCapability = zoom
        exposureControl = V4L2Exposure(controls: controls)
        self.bufferCount = max(2, bufferCount)
        self.devRoot = devRoot
        var logger = logger
        logger[metadataKey: "device.id"] = "\(node.deviceID)"
        self.logger = logger
        wake = try WakePipe(for: node.path)
        let index = Self.initialFormatIndex(handle: handle, formats: formats, wanted: initialFormat)
        let format = formats[index]
        let current = V4L2FormatEnumeration.currentFrameRate(of: handle)
        var rate = frameRate ?? current ?? format.maxFramesPerSecond
        if !format.supports(framesPerSecond: rate) { rate = FormatSelector.defaultFrameRate(of: format) }
        var state = Session(
            path: node.path, handle: handle, formatIndex: index, frameRateRange: FrameRateRange(min: rate, max: rate),
            zoom: ZoomRamp(maximumFactor: format.maxZoomFactor))
        if device.focus.isSupported { state.focusState = V4L2Focus.state(of: handle, controls: controls) }
        state.exposureState = exposureControl?.state(of: handle)
        state.appliedPan = controls.first { $0.id == DeviceControl.panAbsoluteID }?.value ?? 0
        state.appliedTilt = controls.first { $0.id == DeviceControl.tiltAbsoluteID }?.value ?? 0
        published = Mutex(Self.published(from: state))
        session = Mutex(state)
        sensorTiming = V4L2SensorTiming.find(for: node.path, mediaDevices: V4L2SensorTiming.mediaDevicePaths(in: devRoot))
        switch sensorTiming {
        case let .success(sensor):
            logger.info(
                "frame length steerable through the sensor's sub-device",
                metadata: ["sensor": "\(sensor.sensorName)", "subdevice": "\(sensor.subdevicePath)"])
        case let .failure(reason):
            logger.debug("free-running", metadata: ["reason": "\(reason)"])
        }
    }

    public var frameLengthTiming: FrameLengthTiming? {
        guard case let .success(sensor) = sensorTiming else { return nil }
        return sensor.timing(at: activeFrameRate)
    }

    public func setFrameLength(lines: Int) {
        guard case let .success(sensor) = sensorTiming else { return }
        sensor.setFrameLength(lines: lines)
    }

    public var steeringUnavailableReason: String {
        switch sensorTiming {
        case let .success(sensor):
            sensor.lastFailure.map { "the sensor \(sensor.sensorName) refused its frame length: \($0)" } ?? ""
        case let .failure(reason):
            "free-running: \(reason)"
        }
    }

    private static func initialFormatIndex(
        handle: V4L2Handle, formats: [VideoFormat],
        wanted: (width: Int, height: Int, pixelFormat: PixelFormat)?
    ) -> Int {
        if let wanted,
            let index = formats.firstIndex(where: {
                $0.width == wanted.width && $0.height == wanted.height && $0.pixelFormat == wanted.pixelFormat
            })
        {
            return index
        }
        var format = v4l2_format()
        format.type = CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE
        if handle.attempt(CAPFLEET_VIDIOC_G_FMT, &format) == nil,
            let index = formats.firstIndex(where: {
                $0.width == Int(format.fmt.pix.width) && $0.height == Int(format.fmt.pix.height)
                    && $0.pixelFormat.v4l2Code == format.fmt.pix.pixelformat
            })
        {
            return index
        }
        return 0
    }

    /// Runs `body` on the session and publishes what it left, before anyone else can take
    /// the session (lock order: session, then published).
    func withSession<T, E: Error>(_ body: (inout Session) throws(E) -> sending T) throws(E) -> sending T {
        try session.withLock { (state: inout sending Session) throws(E) -> sending T in
            defer { published.withLock { $0 = Self.published(from: state) } }
            return try body(&state)
        }
    }

    private static func published(from state: Session) -> Published {
        Published(
            formatIndex: state.formatIndex, frameRateRange: state.frameRateRange, appliedZoom: state.appliedZoom,
            interruption: state.interruption, focus: state.focusState, exposure: state.exposureState,
            streamStartMonotonic: state.stream?.startedMonotonic ?? 0)
    }

    public var activeFormatIndex: Int { published.withLock { $0.formatIndex } }
    public var activeFrameRateRange: FrameRateRange { published.withLock { $0.frameRateRange } }
    public var outOfBufferDrops: UInt64 { outOfBuffers.load(ordering: .relaxed) }
    public var interruption: Interruption? { published.withLock { $0.interruption } }
    public var streamStartMonotonic: UInt64 { published.withLock { $0.streamStartMonotonic } }

    public func restartStream(streamOnAt monotonic: UInt64) throws(CaptureError) {
        try withSession { (state: inout Session) throws(CaptureError) in
            try refuseWhileInterrupted(state)
            guard state.stream != nil else { throw .unsupportedTimedStart(device: device.deviceID, reason: "it is not streaming") }
            do throws(CaptureError) {
                try restartStream(&state, streamOnAt: monotonic)
            } catch {
                restartAfterRefusal(&state)
                throw error
            }
        }
    }
    public var zoomMethod: ZoomMethod? { zoomCapability.method }
    public var zoomFactor: Double { published.withLock { $0.appliedZoom } }
    public var focus: FocusState? { device.focus.isSupported ? published.withLock { $0.focus } : nil }
    public var exposure: ExposureState? { exposureControl == nil ? nil : published.withLock { $0.exposure } }

    // MARK: Commands

    @discardableResult
    public func setActiveFormat(index: Int) throws(CaptureError) -> ZoomFormatChange? {
        try checkFormat(index)
        let format = device.formats[index]
        return try withSession { (state: inout Session) throws(CaptureError) -> ZoomFormatChange? in
            try refuseWhileInterrupted(state)
            let rate = FormatSelector.frameRate(keeping: state.frameRateRange, on: format)
            let previous = (state.formatIndex, state.frameRateRange, state.zoom)
            state.formatIndex = index
            state.frameRateRange = rate
            let zoomChange: ZoomFormatChange?
            (state.zoom, zoomChange) = state.zoom.adopting(maximumFactor: format.maxZoomFactor)
            guard state.stream != nil else { return zoomChange }
            // A new size or pixel format needs new buffers: restart the stream, and if the
            // driver refuses, go back to what worked (the zoom with it).
            do throws(CaptureError) {
                try restartStream(&state)
            } catch {
                (state.formatIndex, state.frameRateRange, state.zoom) = previous
                restartAfterRefusal(&state)
                throw error
            }
            return zoomChange
        }
    }

    public func setFrameRateRange(_ range: FrameRateRange) throws(CaptureError) {
        try checkFrameRateRange(range)
        let canVary = device.controls.contains { $0.id == CAPFLEET_V4L2_CID_EXPOSURE_AUTO_PRIORITY && !$0.isReadOnly }
        if range.minFramesPerSecond < range.maxFramesPerSecond - 1e-9, !canVary {
            throw .unsupportedFrameDurationRange(
                device: device.deviceID,
                reason: "it runs at one frame rate (no exposure auto priority control); give equal minimum and maximum")
        }
        try withSession { (state: inout Session) throws(CaptureError) in
            try refuseWhileInterrupted(state)
            guard let handle = state.handle else {
                state.frameRateRange = range
                return
            }
            if canVary {
                let varies = range.minFramesPerSecond < range.maxFramesPerSecond
                do throws(V4L2Error) {
                    try V4L2Controls.set(handle, id: CAPFLEET_V4L2_CID_EXPOSURE_AUTO_PRIORITY, to: varies ? 1 : 0, name: "exposure_auto_priority")
                } catch {
                    // A range is exposure allowed to lengthen frames: without the control it
                    // would not be what the device does. A fixed rate runs either way.
                    if varies { throw .deviceFailed(device: device.deviceID, error) }
                    logger.warning("cannot turn exposure auto priority off; the rate may drop in low light", metadata: ["error": "\(error)"])
                }
            }
            let previous = state.frameRateRange
            state.frameRateRange = range
            guard state.stream != nil else { return }
            do throws(CaptureError) {
                // Most drivers change the interval while streaming; some answer EBUSY and
                // need the stream restarted.
                try V4L2Stream.setFrameRate(handle, range.maxFramesPerSecond, deviceID: device.deviceID)
            } catch {
                do throws(CaptureError) {
                    try restartStream(&state)
                } catch {
                    state.frameRateRange = previous
                    restartAfterRefusal(&state)
                    throw error
                }
            }
        }
    }

    /// After the driver refused a change: the stream goes back to what worked. If even that
    /// fails the stream stays down, and the capture loop reopens it and reports an
    /// interruption until it can.
    private func restartAfterRefusal(_ state: inout Session) {
        do throws(CaptureError) {
            try restartStream(&state)
        } catch {
            logger.error("cannot restart the stream with its previous settings", metadata: ["error": "\(error)"])
        }
    }

    public func zoom(_ command: ZoomCommand) throws(CaptureError) {
        try withSession { (state: inout Session) throws(CaptureError) in
            try checkZoom(command, maximum: device.formats[state.formatIndex].maxZoomFactor)
            switch command {
            case let .set(factor): state.zoom.set(factor)
            case let .ramp(factor, rate): state.zoom.ramp(to: factor, rate: rate)
            case .cancel: state.zoom.cancel()
            }
            if case .set = command, state.stream == nil, state.handle != nil { applyZoom(&state, factor: state.zoom.factor) }
        }
    }

    public func focus(_ request: FocusRequest) throws(CaptureError) {
        try checkFocus(request)
        try withSession { (state: inout Session) throws(CaptureError) in
            try refuseWhileInterrupted(state)
            guard let handle = state.handle else { return }
            do throws(V4L2Error) {
                try V4L2Focus.apply(request, to: handle, controls: device.controls)
                state.focusRequest = request
            } catch {
                throw .deviceFailed(device: device.deviceID, error)
            }
            readFocus(&state)
        }
    }

    public func setControl(id: UInt32, value: Int64) throws(CaptureError) -> DeviceControl {
        guard var control = device.controls.first(where: { $0.id == id }) else {
            throw .controlRefused(device: device.deviceID, control: DeviceControl.hexadecimal(id), reason: "the driver has no such control")
        }
        if let reason = control.refusal(of: value) { throw .controlRefused(device: device.deviceID, control: control.name, reason: reason) }
        return try withSession { (state: inout Session) throws(CaptureError) -> DeviceControl in
            try refuseWhileInterrupted(state)
            guard let handle = state.handle else {
                throw .controlRefused(device: device.deviceID, control: control.name, reason: "the device is not open")
            }
            do throws(V4L2Error) {
                try V4L2Controls.set(handle, id: id, to: value, name: control.name)
            } catch {
                throw .deviceFailed(device: device.deviceID, error)
            }
            control.value = V4L2Controls.value(of: handle, id: id)
            if id == DeviceControl.panAbsoluteID { state.appliedPan = control.value ?? value }
            if id == DeviceControl.tiltAbsoluteID { state.appliedTilt = control.value ?? value }
            return control
        }
    }

    public func setExposure(_ request: ExposureRequest) throws(CaptureError) {
        guard let control = exposureControl else {
            throw .unsupportedExposure(device: device.deviceID, reason: "it has no exposure time control (exposure_time_absolute)")
        }
        if let reason = control.refusal(of: request) { throw .unsupportedExposure(device: device.deviceID, reason: reason) }
        try withSession { (state: inout Session) throws(CaptureError) in
            try refuseWhileInterrupted(state)
            guard let handle = state.handle else {
                // Lost a moment ago: the reopened device takes it.
                state.exposureRequest = request
                return
            }
            do throws(V4L2Error) {
                try control.apply(request, to: handle)
                state.exposureRequest = request
            } catch {
                throw .deviceFailed(device: device.deviceID, error)
            }
            readExposure(&state)
        }
    }

    /// Reads where exposure is now (two ioctls). Without the device, the last state read
    /// stands: nil would say the camera has no exposure control.
    func readExposure(_ state: inout Session) {
        guard let control = exposureControl, let handle = state.handle else { return }
        state.exposureState = control.state(of: handle)
        state.exposureReadAt = MonotonicTime.now()
    }

    /// Reads where focus is now (a few ioctls).
    func readFocus(_ state: inout Session) {
        guard device.focus.isSupported else { return }
        state.focusState = state.handle.map { V4L2Focus.state(of: $0, controls: device.controls) }
        state.focusReadAt = MonotonicTime.now()
    }

    private func refuseWhileInterrupted(_ state: Session) throws(CaptureError) {
        if let interruption = state.interruption {
            throw .interrupted(device: device.deviceID, path: state.path, interruption)
        }
    }
}
