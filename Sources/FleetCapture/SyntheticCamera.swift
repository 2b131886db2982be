import FleetCore
import FleetSystem
import Foundation
import Synchronization

/// A test-pattern camera: colour bars, a moving box, and the frame number burned into
/// the pixels (`FrameNumberStamp`). Timed by a simulated sensor (`SensorModel`: its own
/// oscillator, off by its own error, frames of lines, exposure before readout) on
/// CLOCK_MONOTONIC, on a thread it owns, with a realistic format list and the same surface
/// as a V4L2 device, frame length (VBLANK) included. A first-class source for demos and load
/// tests; a host with no camera runs these.
public final class SyntheticCamera: CameraSource {
    public let device: DeviceDescription
    private let bufferCount: Int

    private struct Configuration {
        var formatIndex: Int
        var frameRate: Double
        /// The slowest rate allowed (1 / maximum frame duration); the synthetic scene is
        /// always bright enough to run at `frameRate`.
        var minimumFrameRate: Double
        var zoom: ZoomRamp
        /// Where its pan and tilt point it (arc-seconds): the view moves across the scene once zoomed.
        var pan: Int64 = 0
        var tilt: Int64 = 0
        var lens = SimulatedLens()
        var exposure = SyntheticCamera.automaticExposure
        var generation = 0  // bumped on format or rate changes so the capture thread re-reads them
    }

    private let configuration: Mutex<Configuration>
    private let running = Atomic<Bool>(false)
    /// The capture thread while the camera runs.
    private let captureThread = Mutex<OwnedThread?>(nil)
    /// A frame length asked for by a steering loop, for the capture thread to set.
    private let frameLengthRequest = Mutex<Int?>(nil)
    /// The sensor's oscillator: its error and jitter's seed, the camera's own.
    private let oscillatorErrorPPM: Double
    private let seed: UInt64

    public var frameLengthTiming: FrameLengthTiming? {
        let (format, rate) = configuration.withLock { (device.formats[$0.formatIndex], $0.frameRate) }
        return SyntheticSensor.timing(of: format, at: rate)
    }

    public func setFrameLength(lines: Int) { frameLengthRequest.withLock { $0 = lines } }
    private let outOfBuffers = Atomic<UInt64>(0)

    /// Pictures drawn into every frame (a QR code, a face), fixed in the frame.
    private let overlays: [SyntheticOverlay]
    /// The "Show Overlays" control: whether they are drawn now (a code shown to the camera
    /// and taken away again, as in front of a real one).
    private let overlaysShown = Atomic<Bool>(true)
    /// Puts a CLOCK_MONOTONIC instant in fleet time, for a flash overlay (nil until the agent
    /// has a clock, or while its clock has no estimate).
    private let fleetClock = Mutex<(@Sendable (UInt64) -> UInt64?)?>(nil)

    public init(
        deviceID: String, name: String, initialFormat: (width: Int, height: Int, pixelFormat: PixelFormat)? = nil,
        frameRate: Double = 15, bufferCount: Int = 4, overlays: [SyntheticOverlay] = []
    ) {
        self.overlays = overlays
        oscillatorErrorPPM = SyntheticSensor.frequencyErrorPPM(deviceID: deviceID)
        seed = SyntheticSensor.seed(deviceID: deviceID)
        let formats = Self.formatList
        device = DeviceDescription(
            deviceID: deviceID, name: name, driver: "capfleet-synthetic", kind: .synthetic, formats: formats,
            controls: Self.panTiltControls(pan: 0, tilt: 0) + (overlays.isEmpty ? [] : [Self.showOverlaysControl(value: 1)]),
            focus: SimulatedLens.capabilities)
        let wanted = initialFormat ?? (640, 480, .yuyv)
        let index =
            formats.firstIndex { $0.width == wanted.width && $0.height == wanted.height && $0.pixelFormat == wanted.pixelFormat && !$0.isBinned } ?? 0
        configuration = Mutex(
            Configuration(
                formatIndex: index, frameRate: frameRate, minimumFrameRate: frameRate, zoom: ZoomRamp(maximumFactor: formats[index].maxZoomFactor)))
        self.bufferCount = bufferCount
    }

    /// The sensor is modelled as 4608x3456 with an 8x digital zoom. Its video modes read a
    /// 3840-wide area, so smaller formats can zoom further before they upscale; its still
    /// modes read the whole sensor at full resolution, so any zoom upscales them, as binning
    /// does for the binned mode.
    public static let formatList: [VideoFormat] = {
        let fov = fieldOfViewDegrees
        func format(
            _ w: Int, _ h: Int, _ pixel: PixelFormat, _ ranges: [FrameRateRange], binned: Bool = false,
            fullSensor: Bool = false, bitDepth: Int = 8, colour: ColourDescription? = nil, depthUnitMetres: Double? = nil
        ) -> VideoFormat {
            VideoFormat(
                pixelFormat: pixel, width: w, height: h, frameRateRanges: ranges, fieldOfViewDegrees: fov, maxZoomFactor: maximumZoom,
                upscaleThresholdZoomFactor: binned || fullSensor ? 1 : 3840.0 / Double(w), isBinned: binned, bitDepth: bitDepth,
                colour: colour, depthUnitMetres: depthUnitMetres)
        }
        let upTo30 = [FrameRateRange(min: 1, max: 30)]
        let upTo60 = [FrameRateRange(min: 1, max: 60)]
        let stills = [FrameRateRange(min: 1, max: 5)]
        let linearGrey = ColourDescription(primaries: .bt709, transfer: .linear, matrix: .bt709, range: .full)
        return [
            format(640, 480, .yuyv, upTo60), format(640, 480, .nv12, upTo60),
            format(1280, 720, .yuyv, upTo30), format(1280, 720, .nv12, upTo60),
            format(1920, 1080, .yuyv, upTo30), format(1920, 1080, .nv12, upTo60),
            format(1920, 1080, .nv12, [FrameRateRange(min: 120, max: 120)], binned: true),
            format(3840, 2160, .yuyv, [FrameRateRange(min: 1, max: 15)]), format(3840, 2160, .nv12, upTo30),
            // Small ones last, so the formats' positions above stay what they were.
            format(320, 240, .yuyv, upTo60), format(320, 240, .nv12, upTo60), format(160, 120, .yuyv, upTo60),
            // Stills: the full sensor, slow; Y16 carries its 12-bit samples in the high bits.
            format(4608, 3456, .yuyv, stills, fullSensor: true), format(4608, 3456, .y16, stills, fullSensor: true, bitDepth: 12),
            // Deeper pixels (frames.md, "Colour and depth"): a 12-bit linear machine-vision mode, 10-bit
            // HDR video, and depth in millimetres of a known scene (`TestPatternRenderer`).
            format(1280, 720, .y12, upTo30, bitDepth: 12, colour: linearGrey),
            format(1920, 1080, .p010, upTo30, bitDepth: 10, colour: .bt2020HLG),
            format(640, 480, .z16, upTo30, bitDepth: 16, depthUnitMetres: 0.001),
        ]
    }()

    public var activeFormatIndex: Int { configuration.withLock { $0.formatIndex } }
    public var activeFrameRateRange: FrameRateRange {
        configuration.withLock { FrameRateRange(min: $0.minimumFrameRate, max: $0.frameRate) }
    }
    /// A synthetic camera is never interrupted by its device.
    public var interruption: Interruption? { nil }
    public var focus: FocusState? { configuration.withLock { $0.lens.state } }

    public func focus(_ request: FocusRequest) throws(CaptureError) {
        try checkFocus(request)
        configuration.withLock { $0.lens.apply(request) }
    }
    public var outOfBufferDrops: UInt64 { outOfBuffers.load(ordering: .relaxed) }

    /// The synthetic scene is lit for 10 ms: auto exposure always lands there, and a manual
    /// time scales the light by its ratio to it.
    public static let nominalExposureSeconds = 0.010
    static let automaticExposure = ExposureState(
        automatic: true, seconds: nominalExposureSeconds,
        minimumSeconds: 100e-6, maximumSeconds: 1)

    public var exposure: ExposureState? { configuration.withLock { $0.exposure } }

    /// Takes effect from the next rendered frame: the capture loop reads it for every frame.
    public func setExposure(_ request: ExposureRequest) throws(CaptureError) {
        try checkExposure(request, against: Self.automaticExposure)
        configuration.withLock { config in
            switch request {
            case .automatic: config.exposure = Self.automaticExposure
            case let .manual(seconds):
                config.exposure.automatic = false
                config.exposure.seconds = seconds
            }
        }
    }

    /// A private control, as vivid has its test controls (in the user class, past the
    /// standard ones): a camera with overlays shows or hides them.
    public static let showOverlaysControlID: UInt32 = 0x0098_2900

    static func showOverlaysControl(value: Int64) -> DeviceControl {
        DeviceControl(
            id: showOverlaysControlID, name: "Show Overlays", kind: .boolean, minimum: 0, maximum: 1, step: 1, defaultValue: 1, value: value)
    }

    /// Pan and tilt as a webcam's are (V4L2's PAN_ABSOLUTE and TILT_ABSOLUTE, arc-seconds):
    /// they move its view across the scene once it is zoomed (`OpticalView`), as far as the
    /// largest zoom needs; at 1x the view is the whole scene and they move nothing.
    static func panTiltControls(pan: Int64, tilt: Int64) -> [DeviceControl] {
        // The widest vertical view is the full sensor's 4:3: its tilt range serves every format.
        let view = OpticalView(horizontalFieldOfViewDegrees: fieldOfViewDegrees, aspect: 4.0 / 3.0, maximumZoom: maximumZoom)
        return [
            DeviceControl(
                id: DeviceControl.panAbsoluteID, name: "Pan, Absolute", kind: .integer, minimum: -view.panLimit, maximum: view.panLimit, step: 1,
                defaultValue: 0, value: pan),
            DeviceControl(
                id: DeviceControl.tiltAbsoluteID, name: "Tilt, Absolute", kind: .integer, minimum: -view.tiltLimit, maximum: view.tiltLimit,
                step: 1, defaultValue: 0, value: tilt),
        ]
    }

    static let fieldOfViewDegrees = 78.0
    static let maximumZoom = 8.0

    /// The window of the scene the active format shows at this zoom, pan and tilt.
    static func view(of format: VideoFormat, zoom: Double, pan: Int64, tilt: Int64) -> NormalizedRect {
        OpticalView(
            horizontalFieldOfViewDegrees: format.fieldOfViewDegrees ?? fieldOfViewDegrees, aspect: Double(format.width) / Double(format.height),
            maximumZoom: format.maxZoomFactor
        ).window(zoom: zoom, pan: pan, tilt: tilt)
    }

    public func setControl(id: UInt32, value: Int64) throws(CaptureError) -> DeviceControl {
        if id == DeviceControl.panAbsoluteID || id == DeviceControl.tiltAbsoluteID {
            let (pan, tilt) = configuration.withLock { ($0.pan, $0.tilt) }
            var control = Self.panTiltControls(pan: pan, tilt: tilt)[id == DeviceControl.panAbsoluteID ? 0 : 1]
            if let refusal = control.refusal(of: value) { throw .controlRefused(device: device.deviceID, control: control.name, reason: refusal) }
            configuration.withLock { if id == DeviceControl.panAbsoluteID { $0.pan = value } else { $0.tilt = value } }
            control.value = value
            return control
        }
        guard id == Self.showOverlaysControlID, !overlays.isEmpty else {
            throw .controlRefused(
                device: device.deviceID, control: DeviceControl.hexadecimal(id),
                reason: overlays.isEmpty
                    ? "it has no such control (its controls: pan and tilt; Show Overlays comes with --synthetic-overlay)"
                    : "its controls are pan, tilt and Show Overlays")
        }
        let control = Self.showOverlaysControl(value: value)
        if let refusal = control.refusal(of: value) {
            throw .controlRefused(device: device.deviceID, control: control.name, reason: refusal)
        }
        overlaysShown.store(value != 0, ordering: .relaxed)
        return control
    }

    /// The synthetic sensor zooms by cropping its own pattern: its "device control".
    public var zoomMethod: ZoomMethod? { .deviceControl }
    public var zoomFactor: Double { configuration.withLock { $0.zoom.factor } }

    public func zoom(_ command: ZoomCommand) throws(CaptureError) {
        try checkZoom(command, maximum: device.formats[activeFormatIndex].maxZoomFactor)
        configuration.withLock { config in
            switch command {
            case let .set(factor): config.zoom.set(factor)
            case let .ramp(factor, rate): config.zoom.ramp(to: factor, rate: rate)
            case .cancel: config.zoom.cancel()
            }
        }
    }

    @discardableResult
    public func setActiveFormat(index: Int) throws(CaptureError) -> ZoomFormatChange? {
        try checkFormat(index)
        return configuration.withLock { config in
            config.formatIndex = index
            let format = device.formats[index]
            let (zoom, zoomChange) = config.zoom.adopting(maximumFactor: format.maxZoomFactor)
            config.zoom = zoom
            let rate = FormatSelector.frameRate(keeping: FrameRateRange(min: config.minimumFrameRate, max: config.frameRate), on: format)
            config.frameRate = rate.maxFramesPerSecond
            config.minimumFrameRate = rate.minFramesPerSecond
            config.generation += 1
            return zoomChange
        }
    }

    public func setFrameRateRange(_ range: FrameRateRange) throws(CaptureError) {
        try checkFrameRateRange(range)
        configuration.withLock {
            $0.frameRate = range.maxFramesPerSecond
            $0.minimumFrameRate = range.minFramesPerSecond
            $0.generation += 1
        }
    }

    public func start(
        deliver: @escaping @Sendable (CapturedFrame) -> Void,
        onInterruption: @escaping @Sendable (Interruption?) -> Void
    ) throws(CaptureError) {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { throw .alreadyStreaming(device: device.deviceID) }
        let thread = OwnedThread(name: "cf-synthetic")
        captureThread.withLock { $0 = thread }
        thread.start { [self] in captureLoop(deliver: deliver) }
    }

    /// The clock a flash overlay lights on: its whole seconds of fleet time.
    public func useFleetClock(_ fleetTime: @escaping @Sendable (UInt64) -> UInt64?) { fleetClock.withLock { $0 = fleetTime } }

    /// Stops capturing and waits for the capture thread, at most one frame period.
    public func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        captureThread.withLock { $0.take() }?.joinBlocking()
    }

    private func captureLoop(deliver: @Sendable (CapturedFrame) -> Void) {
        let hasFlash = overlays.contains(where: \.isFlash)
        var generation = -1
        var renderer: TestPatternRenderer?
        var pool: FrameBufferPool?
        var sensor: SensorModel?
        // Frames of the sensors before this one, so that the sequence runs on across modes.
        var sequenceBase: UInt64 = 0
        var lastSequence: UInt64 = 0
        var exposureLines: Int64 = -1
        while running.load(ordering: .acquiring) {
            let config = configuration.withLock { $0 }
            // What is set takes effect at the next frame boundary; a sensor just made is set up
            // before its first (time 0: before any boundary), as a driver sets one before streaming.
            var now = MonotonicTime.now()
            if config.generation != generation {
                generation = config.generation
                let format = device.formats[config.formatIndex]
                let newRenderer = TestPatternRenderer(format: format, overlays: overlays)
                if renderer?.layout != newRenderer.layout {
                    renderer = newRenderer
                    pool = FrameBufferPool(bufferSize: newRenderer.frameBytes, capacity: bufferCount)
                }
                let mode = SyntheticSensor.mode(for: format)
                if sensor?.mode != mode {
                    sequenceBase = lastSequence
                    sensor = SensorModel(
                        mode: mode, frequencyErrorPPM: oscillatorErrorPPM, jitterBound: SyntheticSensor.jitterBound, seed: seed, start: now)
                    exposureLines = -1
                    now = 0
                }
                // A new rate starts from its nominal length; a loop steering it starts over from there.
                frameLengthRequest.withLock { $0 = nil }
                Self.set(.verticalBlanking, to: SyntheticSensor.frameLength(for: config.frameRate, in: mode) - mode.height, on: &sensor!, at: now)
            } else if let lines = frameLengthRequest.withLock({ $0.take() }) {
                Self.set(.verticalBlanking, to: lines - sensor!.mode.height, on: &sensor!, at: now)
            }
            let wantedExposure = Int64((config.exposure.seconds * 1e9 / sensor!.nominalLineTime).rounded())
            if wantedExposure != exposureLines {
                exposureLines = wantedExposure
                Self.set(.exposure, to: wantedExposure, on: &sensor!, at: now)
            }
            var frame = sensor!.nextFrame()
            Self.sleep(until: frame.readoutEnd)
            // A sensor keeps exposing while we are late: the frames read out meanwhile are lost
            // (the sequence jumps, which the agent counts as a discontinuity, as it would for a
            // real driver) and the freshest goes out.
            if let freshest = sensor!.frames(through: MonotonicTime.now()).last { frame = freshest }
            let sequence = sequenceBase + frame.sequence + 1
            lastSequence = sequence
            let renderedAt = MonotonicTime.now()
            let (zoom, gain, pan, tilt) = configuration.withLock { config in
                config.lens.advance(to: renderedAt)
                return (config.zoom.advance(to: renderedAt), config.exposure.seconds / Self.nominalExposureSeconds, config.pan, config.tilt)
            }
            guard renderer != nil, let buffer = pool?.take() else {
                outOfBuffers.add(1, ordering: .relaxed)
                continue
            }
            // A timecode in the scene shows the true start of this exposure, in the kernel's clock
            // (a test's skew of the agent's clock is applied later, to the stamp only).
            // A flash lights the frame whose exposure starts nearest a whole second of fleet time
            // (within half a frame interval of it): a camera on the fleet's grid lights the frame
            // that starts on the second.
            let interval = UInt64(1e9 / max(config.frameRate, 0.1))
            let flashLit =
                hasFlash && (fleetClock.withLock { $0 }?(frame.exposureStart)).map { ($0 &+ interval / 2) % 1_000_000_000 < interval } ?? false
            renderer!.render(
                frameNumber: UInt32(truncatingIfNeeded: sequence),
                view: Self.view(of: device.formats[config.formatIndex], zoom: zoom, pan: pan, tilt: tilt), gain: gain,
                exposureStart: frame.exposureStart,
                flashLit: flashLit, overlaysShown: overlaysShown.load(ordering: .relaxed), into: buffer.storage)
            // Stamped with its start of exposure, as a V4L2 driver stamps a sensor's frame
            // (V4L2_BUF_FLAG_TSTAMP_SRC_SOE), not with when this thread rendered it.
            deliver(
                CapturedFrame(
                    buffer: buffer, byteCount: renderer!.frameBytes, sequence: sequence,
                    captureMonotonicNanoseconds: frame.exposureStart, layout: renderer!.layout, zoomFactor: zoom, pan: pan, tilt: tilt))
        }
    }

    /// Sets one of the sensor's controls; only PIXEL_RATE and a fixed HBLANK refuse, and
    /// neither is set here.
    private static func set(_ control: SensorControlID, to value: Int, on sensor: inout SensorModel, at time: UInt64) {
        set(control, to: Int64(value), on: &sensor, at: time)
    }

    private static func set(_ control: SensorControlID, to value: Int64, on sensor: inout SensorModel, at time: UInt64) {
        do {
            try sensor.set(control, to: value, at: time)
        } catch {
            assertionFailure("the synthetic sensor refused \(control.name): \(error)")
        }
    }

    private static func sleep(until deadline: UInt64) {
        var spec = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        do throws(SystemCallError) {
            try systemCallReturningError("clock_nanosleep", on: "the synthetic camera's frame deadline") {
                clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &spec, nil)
            }
        } catch {
            // Only a deadline the kernel cannot read fails (EINVAL), which the arithmetic above
            // never makes: the frame then goes out early rather than never.
            assertionFailure("\(error)")
        }
    }
}
