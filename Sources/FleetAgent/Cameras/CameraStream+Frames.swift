import FleetCapture
import FleetCore
import FleetProtocol

/// How a capture time is stamped: in the node's clock, and in fleet time once the clock has
/// an estimate. `ClockSync` in the agent; a fixed clock in tests.
protocol CaptureClock: Sendable {
    var nodeClock: NodeClock { get }
    func stamp(captureMonotonic: UInt64) -> (local: UInt64, fleet: UInt64, uncertainty: UInt64, state: ClockEstimator.State)?
}

extension ClockSync: CaptureClock {}

/// The per-frame path, on the source's capture thread: one step of the device's state per
/// frame decides what leaves (real, black or nothing), and whether the take keeps it.
extension CameraStream {
    /// Starts the source delivering into this stream. Device thread only.
    func startDelivering(route: CaptureRoute) throws(CaptureError) {
        precondition(device.thread.isCurrent, "device \(deviceID): the source starts on the device's own thread")
        try source.start(
            deliver: { [self] frame in
                deliver(frame, route: route)
            },
            onInterruption: { [self] interruption in
                step(interruption.map { .deviceInterrupted($0) } ?? .deviceResumed)
            })
    }

    private func deliver(_ frame: CapturedFrame, route: CaptureRoute) {
        let stamp = route.clock.stamp(captureMonotonic: frame.captureMonotonicNanoseconds)
        // Every frame the sensor made steers it, whatever becomes of its pixels.
        if let stamp,
            let lines = alignment.observe(
                sequence: frame.sequence, fleetTime: stamp.fleet, frameRate: source.activeFrameRate, clockLocked: stamp.state == .locked,
                timing: source.frameLengthTiming, captureMonotonic: frame.captureMonotonicNanoseconds,
                streamStart: source.streamStartMonotonic)
        {
            source.setFrameLength(lines: lines)
        }
        let facts = DeviceState.CapturedFrameFacts(
            sequence: frame.sequence, outOfBufferDrops: source.outOfBufferDrops, fleetTime: stamp?.fleet,
            deviceDrops: statistics.drops, pixelFormat: frame.layout.pixelFormat,
            width: frame.layout.width, height: frame.layout.height)
        let (decision, cachedBlack, recordingPath) = guarded.withLock { guarded in
            let decision = guarded.state.frameCaptured(facts)
            announceRealFrames(decision.actions)
            let black = guarded.blackFrame.flatMap { $0.layout == frame.layout ? ($0.buffer, $0.count) : nil }
            return (decision, black, guarded.recordingPath)
        }
        if decision.pixels == .discarded { return }
        statistics.framesCaptured.add(1, ordering: .relaxed)
        statistics.bytesCaptured.add(UInt64(frame.byteCount), ordering: .relaxed)
        if decision.discontinuities > 0 { statistics.discontinuity.add(decision.discontinuities, ordering: .relaxed) }
        perform(decision.actions, recordingPath: recordingPath)
        // Framing with the camera's optics: the window of its whole view this frame shows.
        let opticalView = detection.framesWithOptics ? OpticsSteering.view(of: source) : nil
        // Only real pixels are looked at: what a camera without consent sees stays unseen.
        if decision.pixels == .real {
            detection.offer(
                frame, captureLocal: route.clock.nodeClock.local(fromMonotonic: frame.captureMonotonicNanoseconds), fleetTime: stamp?.fleet,
                nodeID: route.nodeID, view: opticalView?.window(zoom: frame.zoomFactor, pan: frame.pan, tilt: frame.tilt) ?? .whole)
        }
        audits.offer(frame, stamp: stamp.map { ($0.fleet, $0.uncertainty) }, real: decision.pixels == .real)
        if let watch = stillTap.watch, let stamp {
            watch.captured(
                frame, fleetTime: stamp.fleet, uncertainty: stamp.uncertainty, captureLocal: stamp.local, real: decision.pixels == .real,
                period: UInt64(1e9 / max(source.activeFrameRate, 0.1)), deviceID: deviceID)
        }

        var flags = source.device.kind == .synthetic ? UInt32(Capfleet_V1_FrameFlag.synthetic.rawValue) : 0
        if let threshold = source.device.formats[source.activeFormatIndex].upscaleThresholdZoomFactor, frame.zoomFactor > threshold + 1e-9 {
            flags |= UInt32(Capfleet_V1_FrameFlag.upscaled.rawValue)
        }
        if decision.recording { flags |= UInt32(Capfleet_V1_FrameFlag.recording.rawValue) }
        var outgoing = frame
        switch decision.pixels {
        case .real, .discarded:
            break
        case .withheld:
            // The real buffer goes back to the pool here, unsent.
            statistics.withheld.add(1, ordering: .relaxed)
            return
        case .black:
            guard let black = cachedBlack ?? makeBlackFrame(like: frame) else {
                statistics.withheld.add(1, ordering: .relaxed)
                return
            }
            outgoing = CapturedFrame(
                buffer: black.0, byteCount: black.1, sequence: frame.sequence,
                captureMonotonicNanoseconds: frame.captureMonotonicNanoseconds, layout: frame.layout,
                zoomFactor: frame.zoomFactor, deviceTimestamp: frame.deviceTimestamp)
            flags |= UInt32(Capfleet_V1_FrameFlag.black.rawValue)
        }
        var header = Capfleet_V1_FrameHeader(
            capturing: outgoing, nodeID: route.nodeID, deviceID: deviceID,
            flags: flags, consent: decision.consent.wire, drops: decision.deviceDrops)
        header.zoomMethod = source.zoomMethod?.wire ?? .unspecified
        header.deviceTimestampNs = frame.deviceTimestamp
        if let framing = detection.framing(for: frame, optics: opticalView) {
            header.framing = framing.state
            if let aim = framing.aim, optics.aim(aim) {
                onDeviceThread { [self] in optics.apply(to: source, stillFraming: detection.framesWithOptics, logger: logger) }
            }
        }
        // Capture time in this node's clock, and in fleet time once the clock has an estimate.
        header.captureMonotonicNs = route.clock.nodeClock.local(fromMonotonic: outgoing.captureMonotonicNanoseconds)
        if let stamp {
            header.fleetTimeNs = stamp.fleet
            header.fleetTimeUncertaintyNs = stamp.uncertainty
            header.flags |= UInt32(Capfleet_V1_FrameFlag.fleetTimeValid.rawValue)
            frameWatches.captured(atFleetTime: stamp.fleet) {
                .with {
                    $0.sequence = frame.sequence
                    $0.fleetTimeNs = stamp.fleet
                    $0.uncertaintyNs = stamp.uncertainty
                    $0.captureLocalNs = stamp.local
                    $0.frameRate = source.activeFrameRate
                    $0.sync = stamp.state.wire
                    $0.deviceTimestampNs = frame.deviceTimestamp
                }
            }
        }
        statistics.latest.withLock { $0 = (frame.sequence, header.layout) }
        var recorded = false
        var ownCopy = false
        var fedPreRoll = false
        if let take = decision.recordedFor, let recordingPath {
            // A take that starts in the past records what was kept since its start first.
            if preRoll.isOn, let kept = preRoll.handOver(takeID: take.takeID, before: header.fleetTimeNs) {
                recordPreRoll(kept, takeID: take.takeID, drops: take.drops, to: recordingPath)
            }
            outgoing = record(outgoing, header: header, takeID: take.takeID, drops: take.drops, to: recordingPath)
            recorded = recordingPath.reachesCoordinator
            ownCopy = true
            fedPreRoll = recordingPath.feedsPreRoll
        }
        if preRoll.isOn, !fedPreRoll { keepForPreRoll(outgoing, header: header, shared: ownCopy || decision.pixels == .black) }
        // Previews whatever becomes of the full-rate frame: black when it is black.
        if let previews = route.previews { offerPreview(outgoing, header: header, black: decision.pixels == .black, to: previews) }
        // Full-rate frames cross the network only while the coordinator wants them, and once:
        // a frame on its way to the coordinator's recording serves its viewers from there too.
        // The counts above go on either way, in the status report.
        guard liveFlow.isOpen(), !recorded else { return }
        route.publish(outgoing, header)
    }

    /// A frame the take keeps is copied once, out of the capture buffer: the copy goes to the
    /// recording path (which is also how the coordinator's viewers see it) and, returned, to
    /// the preview, so the camera's buffer is free at once and nothing downstream can starve a
    /// camera being recorded.
    private func record(
        _ frame: CapturedFrame, header: Capfleet_V1_FrameHeader, takeID: String, drops: DropTally,
        to recordingPath: any TakeFramePath
    ) -> CapturedFrame {
        let copy = FrameBuffer(unpooledCapacity: frame.byteCount)
        copy.storage.copyMemory(from: frame.buffer.storage, byteCount: frame.byteCount)
        let taken = recordingPath.submit(
            takeID: takeID, deviceID: deviceID, header: header, takeDrops: drops, pixels: copy,
            count: frame.byteCount)
        if !taken {
            // Counted on the device only if the take is still in progress (the state decides).
            step(.takeHandoffDropped(takeID: takeID, reason: recordingPath.refusalReason, count: 1))
        }
        return CapturedFrame(
            buffer: copy, byteCount: frame.byteCount, sequence: frame.sequence,
            captureMonotonicNanoseconds: frame.captureMonotonicNanoseconds, layout: frame.layout, zoomFactor: frame.zoomFactor,
            deviceTimestamp: frame.deviceTimestamp)
    }

    /// The kept frames of a take's pre-roll, recorded before its first live frame, marked as
    /// recorded; what the path refuses is counted as the take's drops.
    private func recordPreRoll(_ kept: [PreRollFrame], takeID: String, drops: DropTally, to recordingPath: any TakeFramePath) {
        let recordingFlag = UInt32(Capfleet_V1_FrameFlag.recording.rawValue)
        let frames = kept.map { frame -> PreRollFrame in
            var frame = frame
            frame.header.flags |= recordingFlag
            return frame
        }
        let refused = recordingPath.submitPreRoll(takeID: takeID, deviceID: deviceID, frames: frames, takeDrops: drops)
        if refused > 0 { step(.takeHandoffDropped(takeID: takeID, reason: recordingPath.refusalReason, count: UInt64(refused))) }
        let span = (frames.last?.header.fleetTimeNs ?? 0) &- (frames.first?.header.fleetTimeNs ?? 0)
        logger.info(
            "pre-roll recorded",
            metadata: ["take.id": "\(takeID)", "frames": "\(frames.count)", "refused": "\(refused)", "span_ms": "\(span / 1_000_000)"])
    }

    /// Keeps the frame for pre-roll: its pixels shared where nothing writes them again (the
    /// take's own copy, the black frame), else copied out of the capture buffer.
    /// An encoded pre-roll's frames go to its encoder instead, whose packets it keeps.
    private func keepForPreRoll(_ frame: CapturedFrame, header: Capfleet_V1_FrameHeader, shared: Bool) {
        let encoder = preRoll.isEncoded ? preRollEncoder.withLock { $0 } : nil
        if preRoll.isEncoded, encoder == nil { return }
        guard header.flags & UInt32(Capfleet_V1_FrameFlag.fleetTimeValid.rawValue) != 0 else { return }
        let pixels = shared ? frame.buffer : preRoll.copy(frame.buffer.storage, count: frame.byteCount)
        guard let encoder else {
            preRoll.keep(header: header, pixels: pixels, count: frame.byteCount)
            return
        }
        preRoll.saw(fleetTime: header.fleetTimeNs)
        if !encoder.offer(header: header, pixels: pixels, count: frame.byteCount) { statistics.encoderLate.add(1, ordering: .relaxed) }
    }

    /// The black frame sent in place of real ones, made once per format, outside the lock:
    /// filling a 4K frame must not hold up the status report.
    private func makeBlackFrame(like frame: CapturedFrame) -> (FrameBuffer, Int)? {
        let layout = frame.layout
        guard let made = BlackFrame.frame(pixelFormat: layout.pixelFormat, width: layout.width, height: layout.height) else { return nil }
        guarded.withLock { $0.blackFrame = (layout, made.buffer, made.count) }
        return made
    }
}
