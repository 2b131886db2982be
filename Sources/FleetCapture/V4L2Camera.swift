import CV4L2
import FleetCore
import FleetSystem
import Foundation
import Synchronization

/// A real camera through libv4l2. Streams with mmap buffers, dequeued on a thread this
/// source owns; each frame is copied into a pooled buffer (so the driver gets its buffer
/// back at once) with the driver's sequence number and monotonic capture time.
///
/// When the device goes away (ENODEV) or another program holds it (EBUSY), the source
/// reports an interruption and keeps trying; it resumes by itself, on the same stable id,
/// even if the device comes back under another /dev/videoN.
public final class V4L2Camera: CameraSource {
    public let device: DeviceDescription
    private let zoomCapability: ZoomCapability
    private let bufferCount: Int
    private let devRoot: String

    /// Everything that touches the device, under one lock: the capture thread holds it
    /// only for a non-blocking DQBUF/QBUF, commands for their few ioctls.
    private struct Session {
        var path: String
        var handle: V4L2Handle?
        var stream: V4L2Stream?
        var formatIndex: Int
        var frameRateRange: FrameRateRange
        var zoom: ZoomRamp
        /// The factor the driver is set to now (control or crop), which frames carry.
        var appliedZoom = 1.0
        var interruption: Interruption?
        /// The last focus request, applied again when the device comes back.
        var focusRequest: FocusRequest?
        /// Added to the driver's sequence, which restarts at every STREAMON, so the
        /// fleet sees one increasing sequence per device.
        var sequenceBase: UInt64 = 0
        var lastSequence: UInt64 = 0
        var pool: FrameBufferPool?
    }

    private let session: Mutex<Session>
    private let running = Atomic<Bool>(false)
    private let outOfBuffers = Atomic<UInt64>(0)
    private let finished = DispatchSemaphore(value: 0)
    private let wake = DispatchSemaphore(value: 0)

    /// Opens `node` and reads its formats, controls and crop capabilities. The device
    /// stays open, so a re-plug is seen as an interruption rather than a new device.
    public init(node: V4L2DeviceNode, bufferCount: Int = 4, initialFormat: (width: Int, height: Int, pixelFormat: PixelFormat)? = nil,
                frameRate: Double? = nil, devRoot: String = "/dev") throws(V4L2Error) {
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
        device = DeviceDescription(deviceID: node.deviceID, name: node.card, driver: node.driver, kind: .v4l2, formats: formats,
                                   controls: controls, crop: crop, focus: V4L2Controls.focusCapabilities(from: controls),
                                   devicePath: node.path, identitySource: node.identitySource)
        zoomCapability = zoom
        self.bufferCount = max(2, bufferCount)
        self.devRoot = devRoot
        let index = Self.initialFormatIndex(handle: handle, formats: formats, wanted: initialFormat)
        let format = formats[index]
        let current = V4L2FormatEnumeration.currentFrameRate(of: handle)
        var rate = frameRate ?? current ?? format.maxFramesPerSecond
        if !format.supports(framesPerSecond: rate) { rate = FormatSelector.defaultFrameRate(of: format) }
        session = Mutex(Session(path: node.path, handle: handle, formatIndex: index, frameRateRange: FrameRateRange(min: rate, max: rate),
                                zoom: ZoomRamp(maximumFactor: format.maxZoomFactor)))
    }

    private static func initialFormatIndex(handle: V4L2Handle, formats: [VideoFormat],
                                           wanted: (width: Int, height: Int, pixelFormat: PixelFormat)?) -> Int {
        if let wanted, let index = formats.firstIndex(where: {
            $0.width == wanted.width && $0.height == wanted.height && $0.pixelFormat == wanted.pixelFormat
        }) { return index }
        var format = v4l2_format()
        format.type = CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE
        if handle.attempt(CAPFLEET_VIDIOC_G_FMT, &format) == nil, let index = formats.firstIndex(where: {
            $0.width == Int(format.fmt.pix.width) && $0.height == Int(format.fmt.pix.height)
                && $0.pixelFormat.v4l2Code == format.fmt.pix.pixelformat
        }) { return index }
        return 0
    }

    public var activeFormatIndex: Int { session.withLock { $0.formatIndex } }
    public var activeFrameRateRange: FrameRateRange { session.withLock { $0.frameRateRange } }
    public var outOfBufferDrops: UInt64 { outOfBuffers.load(ordering: .relaxed) }
    public var interruption: Interruption? { session.withLock { $0.interruption } }
    public var zoomMethod: ZoomMethod? { zoomCapability.method }
    public var zoomFactor: Double { session.withLock { $0.appliedZoom } }

    // MARK: Commands

    public func setActiveFormat(index: Int) throws(CaptureError) {
        guard device.formats.indices.contains(index) else {
            throw .unsupportedFormat(device: device.deviceID, requested: "format #\(index)", supported: device.formats.map(\.label))
        }
        let format = device.formats[index]
        try session.withLock { (state: inout Session) throws(CaptureError) in
            try refuseWhileInterrupted(state)
            var rate = state.frameRateRange
            if !format.supports(framesPerSecond: rate.maxFramesPerSecond) {
                let fps = FormatSelector.defaultFrameRate(of: format)
                rate = FrameRateRange(min: fps, max: fps)
            }
            let previous = (state.formatIndex, state.frameRateRange)
            state.formatIndex = index
            state.frameRateRange = rate
            state.zoom = ZoomRamp(factor: min(state.zoom.factor, format.maxZoomFactor), maximumFactor: format.maxZoomFactor)
            guard state.stream != nil else { return }
            // A new size or pixel format needs new buffers: restart the stream, and if the
            // driver refuses, go back to what worked.
            do throws(CaptureError) {
                try restartStream(&state)
            } catch {
                (state.formatIndex, state.frameRateRange) = previous
                try? restartStream(&state)
                throw error
            }
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
        try session.withLock { (state: inout Session) throws(CaptureError) in
            try refuseWhileInterrupted(state)
            let previous = state.frameRateRange
            state.frameRateRange = range
            guard let handle = state.handle else { return }
            if canVary {
                try? V4L2Controls.set(handle, id: CAPFLEET_V4L2_CID_EXPOSURE_AUTO_PRIORITY,
                                      to: range.minFramesPerSecond < range.maxFramesPerSecond ? 1 : 0, name: "exposure_auto_priority")
            }
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
                    try? restartStream(&state)
                    throw error
                }
            }
        }
    }

    public func zoom(_ command: ZoomCommand) throws(CaptureError) {
        try session.withLock { (state: inout Session) throws(CaptureError) in
            let maximum = device.formats[state.formatIndex].maxZoomFactor
            switch command {
            case let .set(factor), let .ramp(factor, _):
                guard factor >= 1, factor <= maximum + 1e-9 else {
                    throw .unsupportedZoom(device: device.deviceID, requested: factor, maximum: maximum)
                }
            case .cancel:
                break
            }
            switch command {
            case let .set(factor): state.zoom.set(factor)
            case let .ramp(factor, rate): state.zoom.ramp(to: factor, rate: rate)
            case .cancel: state.zoom.cancel()
            }
            if case .set = command, state.stream == nil, state.handle != nil { applyZoom(&state, factor: state.zoom.factor) }
        }
    }

    public var focus: FocusState? {
        guard device.focus.isSupported else { return nil }
        return session.withLock { state -> FocusState? in
            guard let handle = state.handle else { return nil }
            return V4L2Focus.state(of: handle, controls: device.controls)
        }
    }

    public func focus(_ request: FocusRequest) throws(CaptureError) {
        try checkFocus(request)
        try session.withLock { (state: inout Session) throws(CaptureError) in
            try refuseWhileInterrupted(state)
            guard let handle = state.handle else { return }
            do throws(V4L2Error) {
                try V4L2Focus.apply(request, to: handle, controls: device.controls)
                state.focusRequest = request
            } catch {
                throw V4L2Stream.captureError(error, device: device.deviceID)
            }
        }
    }

    private func refuseWhileInterrupted(_ state: Session) throws(CaptureError) {
        if let interruption = state.interruption {
            throw .deviceUnavailable(device: device.deviceID, path: state.path,
                                     reason: "capture is interrupted (\(interruption.reason.rawValue)): \(interruption.message)")
        }
    }

    // MARK: Streaming

    public func start(deliver: @escaping @Sendable (CapturedFrame) -> Void,
                      onInterruption: @escaping @Sendable (Interruption?) -> Void) throws(CaptureError) {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { throw .alreadyStreaming(device: device.deviceID) }
        let thread = Thread { [self] in
            ThreadName.set("cf-v4l2")
            captureLoop(deliver: deliver, onInterruption: onInterruption)
            finished.signal()
        }
        thread.name = "cf-v4l2 \(device.deviceID)"
        thread.start()
    }

    public func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        wake.signal()
        finished.wait()
        session.withLock { state in
            state.stream = nil
            state.interruption = nil
        }
    }

    private func captureLoop(deliver: @Sendable (CapturedFrame) -> Void, onInterruption: @Sendable (Interruption?) -> Void) {
        var reported: Interruption?
        while running.load(ordering: .acquiring) {
            let outcome = session.withLock { (state: inout Session) -> StepOutcome in
                if state.stream == nil {
                    do throws(CaptureError) {
                        try openAndStream(&state)
                    } catch {
                        return .failed(error)
                    }
                }
                return .streaming(state.handle!.fd)
            }
            switch outcome {
            case let .failed(error):
                report(Self.interruption(for: error), reported: &reported, onInterruption: onInterruption)
                // Retry once a second; stop() wakes us at once.
                _ = wake.wait(timeout: .now() + .seconds(1))
                continue
            case let .streaming(fd):
                if reported != nil {
                    reported = nil
                    session.withLock { $0.interruption = nil }
                    onInterruption(nil)
                }
                var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&descriptor, 1, 200)
            }
            switch session.withLock({ (state: inout Session) -> DequeueOutcome in dequeueFrame(&state) }) {
            case let .frame(frame): deliver(frame)
            case .nothing: break
            case let .lost(error):
                // Reported now, even if the device is back by the next try: a replug is an
                // interruption the operator must see, however short.
                report(Self.interruption(for: V4L2Stream.captureError(error, device: device.deviceID)),
                       reported: &reported, onInterruption: onInterruption)
            }
        }
    }

    private func report(_ interruption: Interruption, reported: inout Interruption?, onInterruption: @Sendable (Interruption?) -> Void) {
        var interruption = interruption
        // Retries of the same cause keep the time it began.
        if let reported, reported.reason == interruption.reason { interruption.sinceUnixMilliseconds = reported.sinceUnixMilliseconds }
        session.withLock { [interruption] in $0.interruption = interruption }
        if reported?.reason != interruption.reason {
            reported = interruption
            onInterruption(interruption)
        }
    }

    private enum StepOutcome {
        case streaming(Int32)
        case failed(CaptureError)
    }

    private enum DequeueOutcome {
        case frame(CapturedFrame)
        case nothing
        /// The stream failed (unplugged, or the driver gave up): it was dropped.
        case lost(V4L2Error)
    }

    private static func interruption(for error: CaptureError) -> Interruption {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        if case let .deviceUnavailable(_, _, reason) = error {
            let busy = reason.contains("errno \(EBUSY)")
            return Interruption(reason: busy ? .deviceInUse : .deviceDisconnected, message: error.description, sinceUnixMilliseconds: now)
        }
        return Interruption(reason: .deviceError, message: error.description, sinceUnixMilliseconds: now)
    }

    /// Opens the device if it was lost (finding it again by stable id) and starts streaming.
    private func openAndStream(_ state: inout Session) throws(CaptureError) {
        if state.handle == nil {
            guard let node = V4L2Discovery.node(withID: device.deviceID, devRoot: devRoot) else {
                throw .deviceUnavailable(device: device.deviceID, path: state.path,
                                         reason: "no capture device with this id is present (errno \(ENODEV)); waiting for it to come back")
            }
            do throws(V4L2Error) {
                state.handle = try V4L2Handle(path: node.path)
                state.path = node.path
            } catch {
                throw V4L2Stream.captureError(error, device: device.deviceID)
            }
        }
        try restartStream(&state)
        // A device that was unplugged forgot its settings: give them back.
        if let request = state.focusRequest, let handle = state.handle {
            try? V4L2Focus.apply(request, to: handle, controls: device.controls)
        }
        if let handle = state.handle, device.controls.contains(where: { $0.id == CAPFLEET_V4L2_CID_EXPOSURE_AUTO_PRIORITY && !$0.isReadOnly }) {
            let range = state.frameRateRange
            try? V4L2Controls.set(handle, id: CAPFLEET_V4L2_CID_EXPOSURE_AUTO_PRIORITY,
                                  to: range.minFramesPerSecond < range.maxFramesPerSecond ? 1 : 0, name: "exposure_auto_priority")
        }
    }

    private func restartStream(_ state: inout Session) throws(CaptureError) {
        state.stream = nil
        guard let handle = state.handle else { return }
        let format = device.formats[state.formatIndex]
        var stream: V4L2Stream?
        // The old buffers were just released; some drivers still report the queue busy for a
        // moment afterwards, so a busy answer is asked again a few times before it counts.
        for attempt in 0..<5 {
            do throws(CaptureError) {
                stream = try V4L2Stream(handle: handle, format: format, framesPerSecond: state.frameRateRange.maxFramesPerSecond,
                                        bufferCount: bufferCount, deviceID: device.deviceID)
                break
            } catch {
                let busy: Bool
                if case let .deviceUnavailable(_, _, reason) = error { busy = reason.contains("errno \(EBUSY)") } else { busy = false }
                if busy, attempt < 4 {
                    usleep(100_000)
                    continue
                }
                if case .deviceUnavailable = error, !busy { state.handle = nil }
                throw error
            }
        }
        guard let stream else { return }
        state.stream = stream
        state.sequenceBase = state.lastSequence + (state.lastSequence == 0 ? 0 : 1)
        let frameBytes = format.pixelFormat.frameByteCount(width: format.width, height: format.height) ?? stream.sizeImage
        if state.pool?.bufferSize != frameBytes { state.pool = FrameBufferPool(bufferSize: frameBytes, capacity: bufferCount) }
        if zoomCapability.method != .agentCrop { applyZoom(&state, factor: state.zoom.factor) }
    }

    private func dequeueFrame(_ state: inout Session) -> DequeueOutcome {
        guard let stream = state.stream else { return .nothing }
        let buffer: v4l2_buffer
        do throws(V4L2Error) {
            guard let dequeued = try stream.dequeue() else { return .nothing }
            buffer = dequeued
        } catch {
            return lose(&state, error)
        }
        let outcome = frame(from: buffer, of: stream, &state)
        // The buffer goes back to the driver whatever became of the frame; if it cannot,
        // the stream is lost like a failed dequeue.
        do throws(V4L2Error) {
            try stream.queue(index: buffer.index)
        } catch {
            return lose(&state, error)
        }
        return outcome
    }

    /// The frame in a dequeued buffer, copied (or zoomed) into a pooled buffer.
    private func frame(from buffer: v4l2_buffer, of stream: V4L2Stream, _ state: inout Session) -> DequeueOutcome {
        let sequence = state.sequenceBase + UInt64(buffer.sequence)
        state.lastSequence = sequence
        let monotonic = buffer.flags & CAPFLEET_V4L2_BUF_FLAG_TIMESTAMP_MASK == CAPFLEET_V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC
        let captured = monotonic
            ? UInt64(buffer.timestamp.tv_sec) * 1_000_000_000 + UInt64(buffer.timestamp.tv_usec) * 1000
            : MonotonicTime.now()
        // The factor the driver used for this frame; a change applies from the next one.
        var frameZoom = state.appliedZoom
        let wanted = state.zoom.advance(to: captured)
        if zoomCapability.method == .agentCrop {
            state.appliedZoom = wanted
            frameZoom = wanted
        } else if abs(wanted - state.appliedZoom) > 1e-6 {
            applyZoom(&state, factor: wanted)
        }
        guard let pool = state.pool, let target = pool.take() else {
            outOfBuffers.add(1, ordering: .relaxed)
            return .nothing
        }
        let byteCount: Int
        let scalable = CentredCropScaler.supports(stream.layout.pixelFormat) && stream.driverBytesPerLine == stream.layout.bytesPerLine
        if zoomCapability.method == .agentCrop, frameZoom > 1 + 1e-6, scalable {
            CentredCropScaler(layout: stream.layout).scale(
                from: stream.buffers[Int(buffer.index)].start, to: target.storage, factor: frameZoom)
            byteCount = pool.bufferSize
        } else {
            byteCount = stream.copy(buffer, into: target.storage, capacity: target.capacity)
            // Frames the agent could not scale (padded lines) say so: they carry no zoom.
            if zoomCapability.method == .agentCrop { frameZoom = 1 }
        }
        return .frame(CapturedFrame(buffer: target, byteCount: byteCount, sequence: sequence, captureMonotonicNanoseconds: captured,
                                    layout: stream.layout, zoomFactor: frameZoom))
    }

    /// Unplugged or failing: drop the stream (and the handle if the device is gone); the
    /// loop reports the interruption and reopens the device.
    private func lose(_ state: inout Session, _ error: V4L2Error) -> DequeueOutcome {
        state.stream = nil
        if error.isDisconnect { state.handle = nil }
        return .lost(error)
    }

    /// Sets the zoom control or crop rectangle; keeps what the driver actually chose.
    private func applyZoom(_ state: inout Session, factor: Double) {
        guard let handle = state.handle else { return }
        switch zoomCapability {
        case .control:
            let maximum = device.formats[state.formatIndex].maxZoomFactor
            let value = zoomCapability.controlValue(for: factor, maximumFactor: maximum)
            if (try? V4L2Controls.set(handle, id: CAPFLEET_V4L2_CID_ZOOM_ABSOLUTE, to: value, name: "zoom_absolute")) != nil {
                state.appliedZoom = factor
            }
        case let .crop(capabilities):
            let wanted = capabilities.bounds.centredCrop(zoomFactor: factor)
            if let chosen = try? V4L2Controls.setCrop(handle, to: wanted), chosen.width > 0 {
                state.appliedZoom = Double(capabilities.bounds.width) / Double(chosen.width)
            }
        case .agent:
            state.appliedZoom = factor
        }
    }
}
