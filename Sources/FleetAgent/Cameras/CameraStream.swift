import FleetCapture
import FleetCore
import FleetProtocol
import FleetSystem
import Foundation
import Logging
import Synchronization

/// One camera on the agent: its source, its counters, and its `DeviceState` behind one
/// lock, performed by this shell. Whatever touches the device itself (starting and stopping
/// the source, formats, rates, zoom, focus) runs on the device's own thread, in order; the
/// control thread only queues it and is answered when it is done, so a stream restart never
/// holds up heartbeats. Frames are stepped through the same state on the source's capture
/// thread (CameraStream+Frames.swift).
final class CameraStream: Sendable {
    let source: any CameraSource
    let statistics: DeviceStatistics
    /// Whether the coordinator wants this device's full-rate frames now.
    let liveFlow = LiveFlowGate()
    /// Whether it wants the packets of a take encoding this device (viewers of the encoded stream).
    let encodedFlow = LiveFlowGate()
    /// How those packets reach the live path (from the last registration), read on the encoder's thread.
    private let encodedPublish = Mutex<(@Sendable (CapturedFrame, Capfleet_V1_FrameHeader) -> Void)?>(nil)
    var deviceID: String { source.device.deviceID }

    /// The device's state, and what acting on it needs: the black frame made for its format,
    /// and the recording path of its take.
    struct Guarded {
        var state: DeviceState
        var blackFrame: (layout: FrameLayout, buffer: FrameBuffer, count: Int)?
        var recordingPath: (any TakeFramePath)?
    }
    let guarded: Mutex<Guarded>

    /// The device's own thread.
    let device: OwnedWorker<@Sendable () -> Void>
    /// Where frames go and how they are stamped, from the last registration; the device's thread's own.
    let route: ThreadBound<CaptureRoute?>

    /// FindFirstFrame requests waiting for a frame.
    let frameWatches = FrameWatches()
    /// Where captures fall against the fleet-time grid, and whether they are steered onto it.
    let alignment = FrameAlignmentState()
    /// Which frames become previews (CameraStream+Preview.swift).
    let previews = PreviewTap()
    /// The still being taken now, offered every frame (CameraStream+Still.swift).
    let stillTap = StillTap()
    /// Codes and faces looked for in its frames (DeviceDetection.swift).
    let detection: DeviceDetection
    /// Its own zoom, pan and tilt, while auto-framing steers them (OpticsSteering.swift).
    let optics = OpticsSteering()
    /// The timecode read from its frames while an exposure audit runs (ExposureAuditor.swift).
    let audits: ExposureAuditor
    /// Its last seconds of frames, kept for takes that start in the past (PreRollKeeper.swift).
    let preRoll = PreRollKeeper<PreRollFrame>()
    /// While its pre-roll is kept encoded: the encoder it goes through (PreRollEncoder.swift).
    let preRollEncoder = Mutex<PreRollEncoder?>(nil)
    /// A triggered camera's trigger thread, made when a grid is first set; and the clock
    /// it reads (the route's, kept here since the route is the device thread's own).
    private let trigger = Mutex<GridTriggerLoop?>(nil)
    private let triggerClock = Mutex<(any CaptureClock)?>(nil)

    /// Told, in order and under the state's lock, when real frames start or stop leaving the
    /// host (the recording light): it must only queue, never block.
    private let onRealFrames: @Sendable (_ deviceID: String, _ flowing: Bool) -> Void
    /// Where device events go (to the coordinator).
    let notify: @Sendable (Capfleet_V1_DeviceEvent) -> Void
    /// Unix milliseconds now, for what the state announces.
    let wallClock: @Sendable () -> Int64
    let logger: Logger

    init(
        source: any CameraSource, consent: ConsentState = .notDetermined, logger: Logger,
        wallClock: @escaping @Sendable () -> Int64 = WallClock.system.unixMilliseconds,
        onRealFrames: @escaping @Sendable (_ deviceID: String, _ flowing: Bool) -> Void = { _, _ in },
        notify: @escaping @Sendable (Capfleet_V1_DeviceEvent) -> Void = { _ in }
    ) {
        self.source = source
        statistics = DeviceStatistics(deviceID: source.device.deviceID, outOfBuffers: { [source] in source.outOfBufferDrops })
        guarded = Mutex(Guarded(state: DeviceState(consent: consent)))
        detection = DeviceDetection(deviceID: source.device.deviceID, logger: logger)
        audits = ExposureAuditor(deviceID: source.device.deviceID, logger: logger)
        device = OwnedWorker(name: "cf-device", handle: { job in job() })
        route = ThreadBound(nil, on: device.thread)
        var logger = logger
        logger[metadataKey: "device.id"] = "\(source.device.deviceID)"
        self.logger = logger
        self.wallClock = wallClock
        self.onRealFrames = onRealFrames
        self.notify = notify
    }

    // MARK: The state

    /// Steps the state and performs what it decides.
    func step(_ event: DeviceState.Event) {
        let now = wallClock()
        let (actions, recordingPath) = guarded.withLock { guarded in
            let actions = guarded.state.handle(event, at: now)
            announceRealFrames(actions)
            return (actions, guarded.recordingPath)
        }
        perform(actions, recordingPath: recordingPath)
    }

    /// Under the lock, so the light's on and off follow the state's order whatever thread
    /// stepped it; `onRealFrames` only queues.
    func announceRealFrames(_ actions: [DeviceState.Action]) {
        for case let .realFrames(flowing) in actions { onRealFrames(deviceID, flowing) }
    }

    func perform(_ actions: [DeviceState.Action], recordingPath: (any TakeFramePath)?) {
        for action in actions {
            switch action {
            case .realFrames:
                break  // announced under the lock
            case .startSource:
                onDeviceThread(orNow: true) { [self] in startSource() }
            case .stopSource:
                onDeviceThread(orNow: true) { [self] in stopSource() }
            case let .setFrameRate(change):
                onDeviceThread(orNow: true) { [self] in setFrameRate(change) }
            case let .notify(notice):
                notify(notice.wire(deviceID: deviceID))
            case let .beginTake(takeID):
                recordingPath?.begin(takeID: takeID, deviceID: deviceID)
            case let .endTake(end):
                recordingPath?.end(takeID: end.takeID, deviceID: deviceID, takeDrops: end.drops, reason: end.reason, withholding: end.withholding)
            case let .countTakeDrops(reason, count):
                // The other reasons have counters of their own (the source's, the send queue's).
                if reason == .encoderLate { statistics.encoderLate.add(count, ordering: .relaxed) }
            }
        }
    }

    var state: DeviceState { guarded.withLock { $0.state } }
    var consent: ConsentState { state.consent }
    var isCapturing: Bool { state.isCapturing }

    // MARK: What the agent asks

    /// Enforced from the next frame on. Losing consent turns the recording light off and ends
    /// a take in progress at once.
    func setConsent(_ consent: ConsentState) {
        step(.consentChanged(consent, deviceDrops: statistics.drops))
        // What was kept while it was granted must not reach a take started after it was withdrawn.
        if !consent.allowsRealFrames { preRoll.forget() }
    }

    /// Capture, sending frames by `route` (at every registration; it may have changed).
    func startCapturing(_ route: CaptureRoute) {
        // Queued before any start the step below may queue, so the start finds it.
        onDeviceThread(orNow: true) { [self] in self.route.value = route }
        encodedPublish.withLock { $0 = route.publishEncoded }
        triggerClock.withLock { $0 = route.clock }
        step(.captureWanted)
    }

    /// A packet of a take encoding this device, on the encoder's thread: on to the live path
    /// while viewers of the encoded stream want it (a take recorded on the coordinator serves
    /// them from its recording path instead).
    func offerEncodedPacket(header: Capfleet_V1_FrameHeader, payload: FrameBuffer, count: Int) {
        guard encodedFlow.isOpen(), let publish = encodedPublish.withLock({ $0 }) else { return }
        let layout = FrameLayout(
            pixelFormat: PixelFormat(header.layout.pixelFormat), width: Int(header.layout.width),
            height: Int(header.layout.height), bytesPerLine: 0)
        publish(CapturedFrame(buffer: payload, byteCount: count, sequence: header.sequence, captureMonotonicNanoseconds: 0, layout: layout), header)
    }

    /// No frame leaves from now on; the source stops on its thread.
    func stopCapturing() { step(.captureUnwanted) }

    /// Stops capturing for a reason of the agent's own (shutdown pressure) and reports it.
    func suspend(_ interruption: Interruption) { step(.suspended(interruption)) }

    /// Captures again after `suspend`, once its cause has ended.
    func liftSuspension(because reason: String) { step(.suspensionLifted(reason: reason)) }

    /// Stops capturing and ends the device's thread once what is queued on it is done.
    func close() async {
        stopCapturing()
        // Its thread sets the camera free-running on its way out: a blocking join, on a thread of its own.
        if let trigger = trigger.withLock({ $0.take() }) {
            await OwnedThread.run("cf-untrigger") { trigger.stop() }
        }
        await device.stop()
        await detection.stop()
        await audits.stop()
        // Its takes have ended with its frames: the pre-roll's encoder goes with them.
        if let encoder = preRollEncoder.withLock({ $0.take() }) {
            encoder.retire()
            await encoder.shutdown()
        }
    }

    func stopTake(takeID: String, stop: UInt64?, nowFleet: UInt64?, cause: TakeStopCause) {
        step(.takeStopAsked(takeID: takeID, stopFleet: stop, nowFleet: nowFleet, cause: cause, deviceDrops: statistics.drops))
    }

    /// The take's part begins at `start` (fleet ns); its frames go to `recordingPath`.
    func beginTake(takeID: String, start: UInt64, recordingPath: any TakeFramePath) {
        let isNew = guarded.withLock { guarded in
            guarded.recordingPath = recordingPath
            return guarded.state.take?.takeID != takeID
        }
        // Said again at every registration: only a take new to this part hands its pre-roll over.
        if isNew { preRoll.takeBegan(takeID: takeID, start: start) }
        step(.takeBegan(takeID: takeID, startFleet: start, deviceDrops: statistics.drops))
    }

    /// Frames of a take its encoder lost on its own thread: the device counts those the
    /// encoder was late for. The take's drops hear of them from the encoder itself, in the
    /// packets after them (`EncoderDropOrder`): a tally taken at capture is too early.
    func encoderLost(reason: DropReason, count: UInt64) {
        if reason == .encoderLate { statistics.encoderLate.add(count, ordering: .relaxed) }
    }

    /// Which encoder a take of this device uses, a fallback, or that none could open.
    func announceEncoder(_ message: String) {
        notify(
            .with {
                $0.deviceID = deviceID
                $0.kind = .encoder
                $0.message = message
                $0.unixMs = wallClock()
            })
    }

    /// A stop instant that passed with no frame after it.
    func endTakeIfDue(nowFleet: UInt64) { step(.takeStopDue(nowFleet: nowFleet, deviceDrops: statistics.drops)) }

    func markRecording(_ recording: Bool) { step(.recordingMarked(recording)) }

    /// Queues `job` on the device's own thread. After `close`, nothing runs there any more.
    /// `orNow`: run it at once when the caller is that thread, so what a job decides (a start
    /// that must stop again, a rate step) is done even while the thread drains to close.
    func onDeviceThread(orNow: Bool = false, _ job: @escaping @Sendable () -> Void) {
        if orNow, device.thread.isCurrent {
            job()
        } else {
            device.post(job)
        }
    }

    // MARK: The device's thread

    private func startSource() {
        guard let route = route.value else {
            logger.error("cannot start the device: it has nowhere to send frames yet")
            step(.sourceFailedToStart)
            return
        }
        do {
            try startDelivering(route: route)
            logger.info("streaming")
            step(.sourceStarted)
        } catch {
            logger.error("cannot start the device", metadata: ["error": "\(error)"])
            step(.sourceFailedToStart)
        }
    }

    private func stopSource() {
        source.stop()
        step(.sourceStopped)
    }

    private func setFrameRate(_ change: RateChange) {
        var failure: String?
        do {
            try source.setFrameRateRange(change.range)
        } catch {
            failure = error.description
            logger.warning("a frame-rate policy could not set the rate", metadata: ["error": "\(error)"])
        }
        if let message = change.announcement(failure: failure) {
            notify(DeviceNotice.policyActed(message, atUnixMilliseconds: wallClock()).wire(deviceID: deviceID))
        }
    }

    // MARK: Frame timing

    /// Turns frame alignment on (a grid from `origin`) or off; false when the source cannot
    /// set its frame length (its phase is still reported).
    func setFrameAlignment(origin: UInt64?) -> Bool {
        guard let origin else {
            alignment.set(nil, steerable: false)
            trigger.withLock { $0 }?.follow(origin: nil)
            return true
        }
        if let softwareTrigger = source.softwareTrigger {
            // Each exposure fired at its slot: nothing to steer, nothing to restart.
            alignment.set(FrameAligner(origin: origin), steerable: false, triggered: true)
            triggerLoop(softwareTrigger).follow(origin: origin)
            return true
        }
        let steerable = source.frameLengthTiming != nil
        alignment.set(FrameAligner(origin: origin), steerable: steerable, unsteerableReason: source.steeringUnavailableReason)
        // A source that cannot be steered can still be started on the grid.
        if !steerable { onDeviceThread { [self] in startOnGrid() } }
        return steerable
    }

    /// How the camera is wired to others (proto-docs/clock.md, "Hardware-line triggers").
    private let wiring = Mutex(LineWiring())
    /// It was wired by an earlier alignment: turning that off or changing it touches its lines.
    var isWired: Bool { !wiring.withLock { $0 }.isEmpty }

    /// Alignment with the camera's lines as `wanted` says (origin nil: off, lines let go).
    /// Blocking register writes: on the device thread.
    func setWiredAlignment(origin: UInt64?, wiring wanted: LineWiring) throws(CaptureError) {
        let wanted = origin == nil ? LineWiring() : wanted
        let had = wiring.withLock { $0 }
        guard let lines = source.triggerLines else {
            throw .triggerFailed(
                device: deviceID, reason: "it has no I/O lines to be triggered on or to drive (GenICam LineSelector, TriggerSource Line…)")
        }
        if had.outputLine != wanted.outputLine {
            if !had.outputLine.isEmpty { try lines.setExposureOutput(nil) }
            if !wanted.outputLine.isEmpty { try lines.setExposureOutput(wanted.outputLine) }
        }
        wiring.withLock { $0.outputLine = wanted.outputLine }
        if let origin, !wanted.triggerLine.isEmpty {
            // The line triggers it: no triggers of the agent's, and the camera left free-running
            // by the trigger thread before its FrameStart is given to the line.
            if let loop = trigger.withLock({ $0.take() }) { loop.stop() }
            try lines.setLineTrigger(wanted.triggerLine)
            alignment.set(FrameAligner(origin: origin), steerable: false, triggered: true)
            alignment.triggerModeSet(.hardwareLine(line: wanted.triggerLine, sourceDeviceID: wanted.sourceDeviceID))
        } else {
            if !had.triggerLine.isEmpty { try lines.setLineTrigger(nil) }
            _ = setFrameAlignment(origin: origin)
        }
        alignment.outputLineSet(wanted.outputLine)
        wiring.withLock { $0 = wanted }
    }

    private func triggerLoop(_ softwareTrigger: any SoftwareTrigger) -> GridTriggerLoop {
        trigger.withLock { loop in
            if let loop { return loop }
            let made = GridTriggerLoop(
                deviceID: deviceID, trigger: softwareTrigger, alignment: alignment,
                clock: { [weak self] in
                    let now = MonotonicTime.now()
                    guard let stamp = self?.triggerClock.withLock({ $0 })?.stamp(captureMonotonic: now), stamp.state == .locked else { return nil }
                    return (now, stamp.fleet)
                }, interval: { [source] in UInt64(1e9 / max(source.activeFrameRate, 0.1)) }, logger: logger)
            loop = made
            return made
        }
    }

    /// Starts a free-running source's stream again at the instant that puts its frames on the
    /// grid's slots (`FreeRunStart`): once, from where it then drifts at its own rate. Never
    /// during a take (the restart loses a few frames). Device thread.
    private func startOnGrid() {
        let period = UInt64(1e9 / max(source.activeFrameRate, 0.1))
        let now = MonotonicTime.now()
        let state = self.state
        let locked = route.value.flatMap { $0.clock.stamp(captureMonotonic: now) }?.state == .locked
        if let refusal = FreeRunStart.refusal(streaming: state.isStreaming, recording: state.isRecording, clockLocked: locked) {
            alignment.noteGridStart(.notStarted(refusal))
            return
        }
        // The stop and the new buffers take time before STREAMON: a frame interval and 100 ms.
        var margin = period + 100_000_000
        for attempt in 1...2 {
            let now = MonotonicTime.now()
            guard let nowFleet = route.value.flatMap({ $0.clock.stamp(captureMonotonic: now) })?.fleet,
                let instant = alignment.gridStartInstant(nowMonotonic: now, nowFleet: nowFleet, period: period, margin: margin)
            else {
                alignment.noteGridStart(
                    .notStarted(
                        "its start has not been measured yet at this rate (it learns from the first frames of each start); ask again in a second"))
                return
            }
            do {
                try source.restartStream(streamOnAt: instant)
            } catch {
                alignment.noteGridStart(.notStarted(error.description))
                logger.warning("cannot start the stream on the grid", metadata: ["error": "\(error)"])
                return
            }
            // A wake-up a little late (timer slack) is within what a start can promise.
            let started = source.streamStartMonotonic
            if started <= instant + max(1_000_000, period / 50) {
                alignment.noteGridStart(.started(atFleet: nowFleet + (started - now)))
                logger.notice("stream started on the grid", metadata: ["late.us": "\((started - min(started, instant)) / 1000)"])
                return
            }
            guard attempt == 1 else {
                alignment.noteGridStart(
                    .notStarted(
                        "its stream started \((started - instant) / 1_000_000) ms after the instant asked, twice (a setup longer than \(margin / 1_000_000) ms, or a host whose timers wake late)"
                    ))
                return
            }
            // The setup outlasted the margin: again, with room for it.
            margin += 2 * (started - instant)
        }
    }

    func watchFirstFrame(
        atFleetTime fleetTime: UInt64, waitingAtMost nanoseconds: UInt64,
        answer: @escaping @Sendable (Capfleet_V1_FrameTiming?) -> Void
    ) {
        frameWatches.add(atFleetTime: fleetTime, waitingAtMost: nanoseconds, answer: answer)
    }

    // MARK: Status

    var counters: Capfleet_V1_DeviceCounters {
        let state = self.state
        var counters = statistics.wire
        counters.streaming = state.isStreaming
        if let interruption = state.interruption { counters.interruption = interruption.wire }
        if let focus = source.focus { counters.focus = focus.wire }
        counters.zoomFactor = source.zoomFactor
        counters.activeFrameRate = source.activeFrameRate
        counters.activeMinFrameRate = source.activeFrameRateRange.minFramesPerSecond
        counters.dropRecovery = state.rates.dropRecovery.policy.wire
        counters.pressurePolicy = state.rates.pressurePolicy.wire(active: state.rates.pressureActive)
        counters.consent = state.consent.wire
        counters.recording = state.isRecording
        counters.realFrames = state.realFramesLeaving
        counters.alignment = alignment.wire
        counters.liveFlow = liveFlow.isOpen()
        counters.detectionExamined = detection.examined
        counters.detectionSkipped = detection.skipped
        if let transport = source.streamTransport { counters.streamTransport = transport.wire }
        if let figures = preRoll.figures { counters.preRoll = figures }
        if let region = source.region { counters.region = region.wire }
        if let take = state.take, let queue = guarded.withLock({ $0.recordingPath })?.queue(takeID: take.takeID, deviceID: deviceID) {
            counters.takeQueueDepth = UInt32(clamping: queue.depth)
            counters.takeQueueCapacity = UInt32(clamping: queue.capacity)
            counters.takeQueuePeak = UInt32(clamping: queue.peak)
        }
        return counters
    }
}

/// Where a device's frames go and how their capture times are stamped.
struct CaptureRoute: Sendable {
    var nodeID: String
    var clock: any CaptureClock
    /// Hands a frame and its header to the live path; never blocks.
    var publish: @Sendable (CapturedFrame, Capfleet_V1_FrameHeader) -> Void
    /// Hands a take's encoded packet to the live path (counted apart from the device's frames).
    var publishEncoded: (@Sendable (CapturedFrame, Capfleet_V1_FrameHeader) -> Void)? = nil
    /// Makes the device's previews; nil: none.
    var previews: PreviewMaker? = nil
}

extension DeviceNotice {
    func wire(deviceID: String) -> Capfleet_V1_DeviceEvent {
        .with {
            $0.deviceID = deviceID
            switch self {
            case let .interrupted(interruption, at):
                $0.kind = .interrupted
                $0.interruption = interruption.wire
                $0.unixMs = at
            case let .resumed(message, at):
                $0.kind = .resumed
                $0.message = message
                $0.unixMs = at
            case let .policyActed(message, at):
                $0.kind = .policyActed
                $0.message = message
                $0.unixMs = at
            case let .zoomChanged(change, at):
                $0.kind = .zoomChanged
                $0.message = change.message
                $0.zoomFactor = change.factor
                $0.unixMs = at
            }
        }
    }
}
