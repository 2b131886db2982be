import FleetCore
import FleetSystem
import Foundation
import Synchronization

/// A test-pattern camera: colour bars, a moving box, and the frame number burned into
/// the pixels (`FrameNumberStamp`). Paced from CLOCK_MONOTONIC on a thread it owns, with
/// a realistic format list and the same surface as a V4L2 device. A first-class source
/// for demos and load tests; a host with no camera runs these.
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
        var lens = SimulatedLens()
        var exposure = SyntheticCamera.automaticExposure
        var generation = 0  // bumped on format or rate changes so the capture thread re-reads them
    }

    private let configuration: Mutex<Configuration>
    private let running = Atomic<Bool>(false)
    /// The capture thread while the camera runs.
    private let captureThread = Mutex<OwnedThread?>(nil)
    private let scheduler = Mutex<(any FrameScheduler)?>(nil)

    public func steerFrameTiming(_ scheduler: (any FrameScheduler)?) -> Bool {
        self.scheduler.withLock { $0 = scheduler }
        return true
    }
    private let outOfBuffers = Atomic<UInt64>(0)

    /// Pictures drawn into every frame (a QR code, a face), fixed in the frame.
    private let overlays: [SyntheticOverlay]

    public init(
        deviceID: String, name: String, initialFormat: (width: Int, height: Int, pixelFormat: PixelFormat)? = nil,
        frameRate: Double = 15, bufferCount: Int = 4, overlays: [SyntheticOverlay] = []
    ) {
        self.overlays = overlays
        let formats = Self.formatList
        device = DeviceDescription(
            deviceID: deviceID, name: name, driver: "capfleet-synthetic", kind: .synthetic, formats: formats,
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
        let fov = 78.0
        func format(
            _ w: Int, _ h: Int, _ pixel: PixelFormat, _ ranges: [FrameRateRange], binned: Bool = false,
            fullSensor: Bool = false, bitDepth: Int = 8
        ) -> VideoFormat {
            VideoFormat(
                pixelFormat: pixel, width: w, height: h, frameRateRanges: ranges, fieldOfViewDegrees: fov, maxZoomFactor: 8,
                upscaleThresholdZoomFactor: binned || fullSensor ? 1 : 3840.0 / Double(w), isBinned: binned, bitDepth: bitDepth)
        }
        let upTo30 = [FrameRateRange(min: 1, max: 30)]
        let upTo60 = [FrameRateRange(min: 1, max: 60)]
        let stills = [FrameRateRange(min: 1, max: 5)]
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

    /// Stops capturing and waits for the capture thread, at most one frame period.
    public func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        captureThread.withLock { $0.take() }?.joinBlocking()
    }

    private func captureLoop(deliver: @Sendable (CapturedFrame) -> Void) {
        var generation = -1
        var renderer: TestPatternRenderer?
        var pool: FrameBufferPool?
        var period: UInt64 = 0
        var sequence: UInt64 = 0
        var deadline = MonotonicTime.now()
        while running.load(ordering: .acquiring) {
            let config = configuration.withLock { $0 }
            if config.generation != generation {
                generation = config.generation
                let format = device.formats[config.formatIndex]
                let newRenderer = TestPatternRenderer(format: format, overlays: overlays)
                if renderer?.layout != newRenderer.layout {
                    renderer = newRenderer
                    pool = FrameBufferPool(bufferSize: newRenderer.frameBytes, capacity: bufferCount)
                }
                period = UInt64(1e9 / max(config.frameRate, 0.1))
                deadline = MonotonicTime.now()
            }
            // Nominal timing, unless something steers it (frame alignment).
            deadline = scheduler.withLock { $0 }?.nextDeadline(after: deadline, period: period) ?? deadline + period
            Self.sleep(until: deadline)
            let now = MonotonicTime.now()
            // A sensor keeps exposing while we are late: skipped slots advance the sequence,
            // which the agent counts as a discontinuity, as it would for a real driver.
            if now > deadline + period {
                let missed = (now - deadline) / period
                sequence += missed
                deadline += missed * period
            }
            sequence += 1
            let (zoom, gain) = configuration.withLock { config in
                config.lens.advance(to: now)
                return (config.zoom.advance(to: now), config.exposure.seconds / Self.nominalExposureSeconds)
            }
            guard renderer != nil, let buffer = pool?.take() else {
                outOfBuffers.add(1, ordering: .relaxed)
                continue
            }
            renderer!.render(frameNumber: UInt32(truncatingIfNeeded: sequence), zoom: zoom, gain: gain, into: buffer.storage)
            // Stamped with its slot, as a sensor stamps the start of exposure (a V4L2 driver does
            // so in its interrupt), not with when this thread got round to rendering it.
            deliver(
                CapturedFrame(
                    buffer: buffer, byteCount: renderer!.frameBytes, sequence: sequence,
                    captureMonotonicNanoseconds: deadline, layout: renderer!.layout, zoomFactor: zoom))
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
