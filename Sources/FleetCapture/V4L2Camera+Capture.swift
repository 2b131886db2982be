import CV4L2
import FleetCore
import FleetSystem
import Foundation
import Glibc

/// Streaming: the capture thread (an `OwnedThread`) polls the device, dequeues each buffer
/// under the session's lock, and hands the frame on outside it. A device that fails is
/// reopened once a second, by its stable id, and reported as an interruption meanwhile.
extension V4L2Camera {
    public func start(
        deliver: @escaping @Sendable (CapturedFrame) -> Void,
        onInterruption: @escaping @Sendable (Interruption?) -> Void
    ) throws(CaptureError) {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { throw .alreadyStreaming(device: device.deviceID) }
        let thread = OwnedThread(name: "cf-v4l2")
        session.withLock { $0.captureThread = thread }
        thread.start { [self] in captureLoop(deliver: deliver, onInterruption: onInterruption) }
    }

    /// Stops capturing and waits for the capture thread to end (at most one poll: it is woken).
    public func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        wake.signal()
        session.withLock { $0.captureThread }?.joinBlocking()
        wake.drain()
        withSession { state in
            state.captureThread = nil
            state.stream = nil
            state.interruption = nil
        }
    }

    private func captureLoop(deliver: @Sendable (CapturedFrame) -> Void, onInterruption: @Sendable (Interruption?) -> Void) {
        var reported: Interruption?
        while running.load(ordering: .acquiring) {
            let outcome = withSession { (state: inout Session) -> StepOutcome in
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
                report(Self.interruption(for: error, at: wallClock.unixMilliseconds()), reported: &reported, onInterruption: onInterruption)
                // Retry once a second; stop() wakes us at once.
                wake.wait(alongside: nil, milliseconds: 1000)
                continue
            case let .streaming(fd):
                if reported != nil {
                    reported = nil
                    withSession { $0.interruption = nil }
                    onInterruption(nil)
                }
                wake.wait(alongside: fd, milliseconds: 200)
            }
            switch withSession({ (state: inout Session) -> DequeueOutcome in dequeueFrame(&state) }) {
            case let .frame(frame): deliver(frame)
            case .nothing: break
            case let .lost(error):
                // Reported now, even if the device is back by the next try: a replug is an
                // interruption the operator must see, however short.
                report(
                    Self.interruption(for: .deviceFailed(device: device.deviceID, error), at: wallClock.unixMilliseconds()), reported: &reported,
                    onInterruption: onInterruption)
            }
        }
    }

    private func report(_ interruption: Interruption, reported: inout Interruption?, onInterruption: @Sendable (Interruption?) -> Void) {
        var interruption = interruption
        // Retries of the same cause keep the time it began.
        if let reported, reported.reason == interruption.reason { interruption.sinceUnixMilliseconds = reported.sinceUnixMilliseconds }
        withSession { [interruption] in $0.interruption = interruption }
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

    static func interruption(for error: CaptureError, at unixMilliseconds: Int64) -> Interruption {
        let reason: InterruptionReason = error.isBusy ? .deviceInUse : error.isDisconnect ? .deviceDisconnected : .deviceError
        return Interruption(reason: reason, message: error.description, sinceUnixMilliseconds: unixMilliseconds)
    }

    /// Opens the device if it was lost (finding it again by stable id) and starts streaming.
    private func openAndStream(_ state: inout Session) throws(CaptureError) {
        if state.handle == nil {
            guard let node = V4L2Discovery.node(withID: device.deviceID, devRoot: devRoot) else {
                throw .notPresent(device: device.deviceID, lastPath: state.path)
            }
            do throws(V4L2Error) {
                state.handle = try V4L2Handle(path: node.path)
                state.path = node.path
            } catch {
                throw .deviceFailed(device: device.deviceID, error)
            }
        }
        try restartStream(&state)
        guard let handle = state.handle else { return }
        // A device that was unplugged forgot its settings: give them back. One that will not
        // take them streams anyway, and says so.
        if let request = state.focusRequest {
            do throws(V4L2Error) {
                try V4L2Focus.apply(request, to: handle, controls: device.controls)
            } catch {
                logger.warning("the device came back but would not take its focus again", metadata: ["error": "\(error)"])
            }
        }
        if let request = state.exposureRequest, let exposureControl {
            do throws(V4L2Error) {
                try exposureControl.apply(request, to: handle)
            } catch {
                logger.warning("the device came back but would not take its exposure again", metadata: ["error": "\(error)"])
            }
        }
        if device.controls.contains(where: { $0.id == CAPFLEET_V4L2_CID_EXPOSURE_AUTO_PRIORITY && !$0.isReadOnly }) {
            let range = state.frameRateRange
            do throws(V4L2Error) {
                try V4L2Controls.set(
                    handle, id: CAPFLEET_V4L2_CID_EXPOSURE_AUTO_PRIORITY,
                    to: range.minFramesPerSecond < range.maxFramesPerSecond ? 1 : 0, name: "exposure_auto_priority")
            } catch {
                logger.warning("the device came back but would not take its frame-duration range again", metadata: ["error": "\(error)"])
            }
        }
        readFocus(&state)
        readExposure(&state)
    }

    /// How long a queue may stay busy after this stream's own buffers were released.
    static let busyAfterReleasePatience: UInt64 = 2_000_000_000

    /// `streamOnAt`: STREAMON at that CLOCK_MONOTONIC instant, once the buffers are ready.
    func restartStream(_ state: inout Session, streamOnAt: UInt64? = nil) throws(CaptureError) {
        // Busy after a stream of our own: the queue kept its buffers, not another program.
        var mayReopen = state.stream != nil
        state.stream = nil
        guard var handle = state.handle else { return }
        let format = device.formats[state.formatIndex]
        var stream: V4L2Stream?
        // The old buffers were just released; some drivers still report the queue busy for a
        // moment afterwards (vivid in an emulated guest under load, for well over 400 ms), so a
        // busy answer is asked again for up to two seconds before it counts.
        var givesUpAt = MonotonicTime.now() + Self.busyAfterReleasePatience
        while true {
            do throws(CaptureError) {
                stream = try V4L2Stream(
                    handle: handle, format: format, framesPerSecond: state.frameRateRange.maxFramesPerSecond,
                    bufferCount: bufferCount, deviceID: device.deviceID, streamOnAt: streamOnAt)
                break
            } catch {
                if error.isBusy, MonotonicTime.now() < givesUpAt {
                    usleep(100_000)
                    continue
                }
                // Still busy: the driver kept the old buffers (vivid's queue can refuse to free
                // them, and then refuses every new format for good). Closing the node frees
                // them; the controls are the device's, not the file's, and stay set.
                if error.isBusy, mayReopen {
                    mayReopen = false
                    logger.warning("the queue stayed busy after its own buffers were released; opening the device again")
                    state.handle = nil
                    do throws(V4L2Error) {
                        handle = try V4L2Handle(path: state.path)
                    } catch {
                        throw .deviceFailed(device: device.deviceID, error)
                    }
                    state.handle = handle
                    givesUpAt = MonotonicTime.now() + Self.busyAfterReleasePatience
                    continue
                }
                if error.isDisconnect {
                    state.handle = nil
                    state.focusState = nil
                }
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
        // Autofocus moves the lens by itself: status reports see where it is within a second.
        if device.focus.isSupported, MonotonicTime.now() - state.focusReadAt > 1_000_000_000 { readFocus(&state) }
        // Auto exposure changes the time by itself, likewise.
        if exposureControl != nil, MonotonicTime.now() - state.exposureReadAt > 1_000_000_000 { readExposure(&state) }
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
        let captured =
            monotonic
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
        return .frame(
            CapturedFrame(
                buffer: target, byteCount: byteCount, sequence: sequence, captureMonotonicNanoseconds: captured,
                layout: stream.layout, zoomFactor: frameZoom, pan: state.appliedPan, tilt: state.appliedTilt))
    }

    /// Unplugged or failing: drop the stream (and the handle if the device is gone); the
    /// loop reports the interruption and reopens the device.
    private func lose(_ state: inout Session, _ error: V4L2Error) -> DequeueOutcome {
        state.stream = nil
        if error.isDisconnect {
            state.handle = nil
            state.focusState = nil
        }
        return .lost(error)
    }

    /// Sets the zoom control or crop rectangle; keeps what the driver actually chose, so a
    /// refused step leaves frames carrying the factor they really have (and is tried again
    /// with the next frame while a ramp runs).
    func applyZoom(_ state: inout Session, factor: Double) {
        guard let handle = state.handle else { return }
        switch zoomCapability {
        case .control:
            let maximum = device.formats[state.formatIndex].maxZoomFactor
            let value = zoomCapability.controlValue(for: factor, maximumFactor: maximum)
            do throws(V4L2Error) {
                try V4L2Controls.set(handle, id: CAPFLEET_V4L2_CID_ZOOM_ABSOLUTE, to: value, name: "zoom_absolute")
                state.appliedZoom = factor
            } catch {
                logger.debug("the zoom control refused a step", metadata: ["error": "\(error)"])
            }
        case let .crop(capabilities):
            let wanted = capabilities.bounds.centredCrop(zoomFactor: factor)
            do throws(V4L2Error) {
                let chosen = try V4L2Controls.setCrop(handle, to: wanted)
                if chosen.width > 0 { state.appliedZoom = Double(capabilities.bounds.width) / Double(chosen.width) }
            } catch {
                logger.debug("the crop selection refused a step", metadata: ["error": "\(error)"])
            }
        case .agent:
            state.appliedZoom = factor
        }
    }
}
