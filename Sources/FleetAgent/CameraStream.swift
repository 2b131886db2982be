import FleetCapture
import FleetCore
import FleetProtocol
import Foundation
import Synchronization

/// A source together with its counters, the per-frame bookkeeping done on its thread,
/// and its opt-in drop recovery.
final class CameraStream: Sendable {
    let source: any CameraSource
    let statistics: DeviceStatistics
    private let gaps = Mutex(SequenceGapDetector())
    /// Out-of-buffer drops already seen, so a frame the source dropped for want of a buffer
    /// is not counted again as a discontinuity when the next frame's sequence jumps over it.
    private let outOfBuffersSeen = Atomic<UInt64>(0)

    private struct RecoveryState {
        var recovery = DropRecovery(policy: .off)
        /// What the operator asked for; drop recovery only ever lowers from, and restores to, this.
        var requested: FrameRateRange?
        var lastCaptured: UInt64 = 0
        var lastLate: UInt64 = 0
        var pressurePolicy = PressurePolicy.off
        /// The policy's cap is in force (the node is at its level or above).
        var pressureActive = false
        /// The range the cap lowered the device to; nil when the device already ran at or
        /// below the cap. Drop recovery steps down from this while the cap is in force.
        var pressureRange: FrameRateRange?
    }

    private let recovery = Mutex(RecoveryState())
    /// Started once per run; `statistics.streaming` also drops while the device is interrupted.
    private let started = Atomic<Bool>(false)

    var isStarted: Bool { started.load(ordering: .acquiring) }

    /// Set while the agent holds the device stopped itself (pressure at shutdown).
    private let suspension = Mutex<Interruption?>(nil)
    /// What `start` was given, to start again after a suspension.
    private let runContext = Mutex<(nodeID: String, publisher: FramePublisher, clock: ClockSync,
                                    events: @Sendable (Capfleet_V1_DeviceEvent) -> Void)?>(nil)

    var isSuspended: Bool { suspension.withLock { $0 != nil } }

    /// FindFirstFrame requests waiting for a frame.
    private let frameWatches = FrameWatches()
    /// Where captures fall against the fleet-time grid, and whether they are steered onto it.
    let alignment = FrameAlignmentState()

    /// Turns frame alignment on (a grid from `origin`) or off; false when the source cannot
    /// adjust its timing (its phase is still reported).
    func setFrameAlignment(origin: UInt64?, clock: ClockSync) -> Bool {
        guard let origin else {
            _ = source.steerFrameTiming(nil)
            alignment.set(nil, steered: false)
            return true
        }
        let aligner = FrameAligner(origin: origin)
        let steered = source.steerFrameTiming(FleetGridScheduler(clock: clock, aligner: aligner))
        alignment.set(aligner, steered: steered)
        return steered
    }

    func watchFirstFrame(atFleetTime fleetTime: UInt64, waitingAtMost nanoseconds: UInt64,
                         answer: @escaping @Sendable (Capfleet_V1_FrameTiming?) -> Void) {
        frameWatches.add(atFleetTime: fleetTime, waitingAtMost: nanoseconds, answer: answer)
    }

    /// Consent and recording as this agent enforces them, and whether real pixels are leaving.
    private struct PrivacyState {
        var consent: ConsentState
        var recording = false
        var realFramesFlowing = false
    }
    private let privacy: Mutex<PrivacyState>
    /// The take this device is recorded for, if any: its frames also go on the recording path.
    let takeTap: TakeTap
    /// The black frame sent in place of real ones, made once per format.
    private let blackFrame = Mutex<(layout: FrameLayout, buffer: FrameBuffer, count: Int)?>(nil)
    /// Told when real frames start (true) or stop (false) leaving the host: the recording light.
    private let onRealFrames: @Sendable (_ deviceID: String, _ flowing: Bool) -> Void

    init(source: any CameraSource, consent: ConsentState = .notDetermined,
         onRealFrames: @escaping @Sendable (_ deviceID: String, _ flowing: Bool) -> Void = { _, _ in }) {
        self.source = source
        self.statistics = DeviceStatistics(deviceID: source.device.deviceID, outOfBuffers: { [source] in source.outOfBufferDrops })
        privacy = Mutex(PrivacyState(consent: consent))
        takeTap = TakeTap(deviceID: source.device.deviceID)
        self.onRealFrames = onRealFrames
    }

    var consent: ConsentState { privacy.withLock { $0.consent } }

    /// Enforced from the next frame on. Losing consent turns the recording light off at once.
    func setConsent(_ state: ConsentState) {
        let stopped = privacy.withLock { privacy -> Bool in
            privacy.consent = state
            guard !state.allowsRealFrames, privacy.realFramesFlowing else { return false }
            privacy.realFramesFlowing = false
            return true
        }
        if stopped { onRealFrames(source.device.deviceID, false) }
    }

    func setRecording(_ recording: Bool) { privacy.withLock { $0.recording = recording } }

    /// Real frames stopped for a reason other than consent (stopped, suspended, interrupted).
    private func realFramesStopped() {
        let stopped = privacy.withLock { privacy -> Bool in
            defer { privacy.realFramesFlowing = false }
            return privacy.realFramesFlowing
        }
        if stopped { onRealFrames(source.device.deviceID, false) }
    }

    /// A black frame with `frame`'s layout, sequence and capture time; nil for formats that
    /// cannot be made black (the frame is then withheld).
    private func blackened(_ frame: CapturedFrame) -> CapturedFrame? {
        let cached = blackFrame.withLock { cached -> (FrameBuffer, Int)? in
            if let cached, cached.layout == frame.layout { return (cached.buffer, cached.count) }
            let layout = frame.layout
            guard let made = BlackFrame.frame(pixelFormat: layout.pixelFormat, width: layout.width, height: layout.height) else { return nil }
            cached = (layout, made.buffer, made.count)
            return made
        }
        guard let (buffer, count) = cached else { return nil }
        return CapturedFrame(buffer: buffer, byteCount: count, sequence: frame.sequence,
                             captureMonotonicNanoseconds: frame.captureMonotonicNanoseconds, layout: frame.layout, zoomFactor: frame.zoomFactor)
    }

    var dropRecoveryPolicy: DropRecoveryPolicy { recovery.withLock { $0.recovery.policy } }

    var pressurePolicyWire: Capfleet_V1_PressurePolicy { recovery.withLock { $0.pressurePolicy.wire(active: $0.pressureActive) } }

    var counters: Capfleet_V1_DeviceCounters {
        var counters = statistics.wire
        if let interruption = suspension.withLock({ $0 }) ?? source.interruption { counters.interruption = interruption.wire }
        if let focus = source.focus { counters.focus = focus.wire }
        counters.zoomFactor = source.zoomFactor
        counters.activeFrameRate = source.activeFrameRate
        counters.activeMinFrameRate = source.activeFrameRateRange.minFramesPerSecond
        counters.dropRecovery = dropRecoveryPolicy.wire
        counters.pressurePolicy = pressurePolicyWire
        let privacy = privacy.withLock { $0 }
        counters.consent = privacy.consent.wire
        counters.recording = privacy.recording
        counters.realFrames = privacy.realFramesFlowing && statistics.streaming.load(ordering: .acquiring)
        counters.alignment = alignment.wire
        return counters
    }

    func start(nodeID: String, publisher: FramePublisher, clock: ClockSync,
               events: @escaping @Sendable (Capfleet_V1_DeviceEvent) -> Void) throws(CaptureError) {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        runContext.withLock { $0 = (nodeID, publisher, clock, events) }
        // A start that fails leaves the stream stopped, so the next registration tries again.
        var succeeded = false
        defer { if !succeeded { started.store(false, ordering: .releasing) } }
        let synthetic = source.device.kind == .synthetic
        let deviceID = source.device.deviceID
        try source.start(deliver: { [self] frame in
            statistics.framesCaptured.add(1, ordering: .relaxed)
            let skipped = gaps.withLock { $0.observe(frame.sequence) }
            let outOfBuffers = source.outOfBufferDrops
            let droppedHere = outOfBuffers - outOfBuffersSeen.exchange(outOfBuffers, ordering: .relaxed)
            if skipped > droppedHere { statistics.discontinuity.add(skipped - droppedHere, ordering: .relaxed) }
            var flags = synthetic ? UInt32(Capfleet_V1_FrameFlag.synthetic.rawValue) : 0
            if let threshold = source.device.formats[source.activeFormatIndex].upscaleThresholdZoomFactor, frame.zoomFactor > threshold + 1e-9 {
                flags |= UInt32(Capfleet_V1_FrameFlag.upscaled.rawValue)
            }
            // Consent is read for every frame: a denial applies from the next one on.
            let (consent, recording, started) = privacy.withLock { privacy -> (ConsentState, Bool, Bool) in
                let real = privacy.consent.allowsRealFrames
                defer { privacy.realFramesFlowing = real }
                return (privacy.consent, privacy.recording, real && !privacy.realFramesFlowing)
            }
            if recording { flags |= UInt32(Capfleet_V1_FrameFlag.recording.rawValue) }
            var outgoing = frame
            if !consent.allowsRealFrames {
                // The real buffer goes back to the pool here, unsent.
                guard let black = blackened(frame) else {
                    statistics.withheld.add(1, ordering: .relaxed)
                    return
                }
                outgoing = black
                flags |= UInt32(Capfleet_V1_FrameFlag.black.rawValue)
            }
            if started { onRealFrames(deviceID, true) }
            var header = Capfleet_V1_FrameHeader(capturing: outgoing, nodeID: nodeID, deviceID: deviceID,
                                                 flags: flags, consent: consent.wire, drops: statistics.drops)
            header.zoomMethod = source.zoomMethod?.wire ?? .unspecified
            // Capture time in this node's clock, and in fleet time once the clock has an estimate.
            header.captureMonotonicNs = clock.nodeClock.local(fromMonotonic: outgoing.captureMonotonicNanoseconds)
            if let stamp = clock.stamp(captureMonotonic: outgoing.captureMonotonicNanoseconds) {
                header.fleetTimeNs = stamp.fleet
                header.fleetTimeUncertaintyNs = stamp.uncertainty
                header.flags |= UInt32(Capfleet_V1_FrameFlag.fleetTimeValid.rawValue)
                alignment.observe(fleetTime: stamp.fleet, frameRate: source.activeFrameRate, locked: stamp.state == .locked)
                frameWatches.captured(atFleetTime: stamp.fleet) {
                    .with {
                        $0.sequence = frame.sequence
                        $0.fleetTimeNs = stamp.fleet
                        $0.uncertaintyNs = stamp.uncertainty
                        $0.captureLocalNs = stamp.local
                        $0.frameRate = source.activeFrameRate
                        $0.sync = stamp.state.wire
                    }
                }
            }
            let recorded = takeTap.offer(outgoing, header: header,
                                         fleetTime: header.flags & UInt32(Capfleet_V1_FrameFlag.fleetTimeValid.rawValue) != 0 ? header.fleetTimeNs : nil,
                                         deviceDrops: statistics.drops)
            publisher.submit(recorded ?? outgoing, header: header, statistics: statistics)
        }, onInterruption: { [self] interruption in
            statistics.streaming.store(interruption == nil, ordering: .releasing)
            if interruption != nil { realFramesStopped() }
            events(.with {
                $0.deviceID = deviceID
                $0.unixMs = Int64(Date().timeIntervalSince1970 * 1000)
                if let interruption {
                    $0.kind = .interrupted
                    $0.interruption = interruption.wire
                } else {
                    $0.kind = .resumed
                    $0.message = "capture resumed by itself"
                }
            })
        })
        statistics.streaming.store(true, ordering: .releasing)
        succeeded = true
    }

    /// Stops capturing for a reason of the agent's own (the host at shutdown pressure) and
    /// reports it as an interruption.
    func suspend(_ interruption: Interruption) {
        guard suspension.withLock({ current in
            defer { current = interruption }
            return current == nil
        }) else { return }
        source.stop()
        started.store(false, ordering: .releasing)
        statistics.streaming.store(false, ordering: .releasing)
        realFramesStopped()
        runContext.withLock { $0 }?.events(.with {
            $0.deviceID = source.device.deviceID
            $0.kind = .interrupted
            $0.interruption = interruption.wire
            $0.unixMs = interruption.sinceUnixMilliseconds
        })
    }

    /// Capture again after `suspend`, once its cause has ended.
    func resumeFromSuspension(because reason: String) throws(CaptureError) {
        let wasSuspended = suspension.withLock { current in
            defer { current = nil }
            return current != nil
        }
        // Never started (suspended before the first WELCOME): registration starts it.
        guard wasSuspended, let context = runContext.withLock({ $0 }) else { return }
        try start(nodeID: context.nodeID, publisher: context.publisher, clock: context.clock, events: context.events)
        context.events(.with {
            $0.deviceID = source.device.deviceID
            $0.kind = .resumed
            $0.message = reason
            $0.unixMs = Int64(Date().timeIntervalSince1970 * 1000)
        })
    }

    func stop() {
        started.store(false, ordering: .releasing)
        source.stop()
        statistics.streaming.store(false, ordering: .releasing)
        realFramesStopped()
    }

    func setDropRecovery(_ policy: DropRecoveryPolicy) {
        let restore = recovery.withLock { state -> FrameRateRange? in
            let lowered = state.recovery.loweredRate != nil
            state.recovery.policy = policy
            // Turning the policy off gives the operator's rate back at once.
            guard !policy.isEnabled, lowered, let requested = state.requested else { return nil }
            state.recovery.operatorChangedRate()
            return requested
        }
        if let restore { try? source.setFrameRateRange(restore) }
    }

    func operatorChangedRate() {
        recovery.withLock { state in
            state.recovery.operatorChangedRate()
            state.requested = source.activeFrameRateRange
        }
    }

    /// One interval of the drop-recovery policy; returns the event to announce when it acted.
    func evaluateDropRecovery() -> Capfleet_V1_DeviceEvent? {
        let captured = statistics.framesCaptured.load(ordering: .relaxed)
        // Frames lost downstream — late (the send queue was full) or out of buffers (frames
        // still held by a slow consumer) — are what a lower rate can cure; sensor
        // discontinuities are not.
        let late = statistics.late.load(ordering: .relaxed) + source.outOfBufferDrops
        let format = source.device.formats[source.activeFormatIndex]
        let decision = recovery.withLock { state -> (DropRecovery.Directive, FrameRateRange) in
            defer {
                state.lastCaptured = captured
                state.lastLate = late
            }
            let operatorRange = state.requested ?? source.activeFrameRateRange
            if state.requested == nil { state.requested = operatorRange }
            // Under a pressure cap, drop recovery steps down from (and restores to) the cap.
            let requested = state.pressureRange ?? operatorRange
            let directive = state.recovery.evaluate(framesCaptured: captured - state.lastCaptured, lateDrops: late - state.lastLate,
                                                    requestedRate: requested.maxFramesPerSecond, format: format)
            return (directive, requested)
        }
        let message: String
        switch decision.0 {
        case .keep:
            return nil
        case let .lower(rate, lateDrops):
            do {
                try source.setFrameRateRange(FrameRateRange(min: min(rate, decision.1.minFramesPerSecond), max: rate))
            } catch {
                return nil
            }
            message = "drop recovery lowered the frame rate to \(VideoFormat.trim(rate)) fps after \(lateDrops) late or out-of-buffer drops in a second"
        case let .restore(rate):
            guard (try? source.setFrameRateRange(decision.1)) != nil else { return nil }
            message = "drop recovery restored the frame rate to \(VideoFormat.trim(rate)) fps: no late or out-of-buffer drops for \(dropRecoveryPolicy.quietIntervalsToRestore) s"
        }
        return .with {
            $0.deviceID = source.device.deviceID
            $0.kind = .policyActed
            $0.message = message
            $0.unixMs = Int64(Date().timeIntervalSince1970 * 1000)
        }
    }

    /// Sets the pressure policy and applies it at the node's current level.
    func setPressurePolicy(_ policy: PressurePolicy, level: PressureLevel, detail: String) -> Capfleet_V1_DeviceEvent? {
        let wasActive = recovery.withLock { state in
            state.pressurePolicy = policy
            return state.pressureActive
        }
        guard policy.applies(at: level) else {
            return liftPressureCap(reason: policy.isEnabled ? "the pressure policy changed" : "the pressure policy is off")
        }
        guard wasActive else { return applyPressure(level: level, detail: detail) }
        // A new cap while one is in force: go straight to the new rate.
        recovery.withLock { state in
            state.pressureActive = false
            state.pressureRange = nil
        }
        return applyPressure(level: level, detail: detail, replacing: true)
    }

    /// The operator set a rate: it becomes the rate to restore, and an active cap applies to it.
    func operatorChangedRate(level: PressureLevel, detail: String) -> Capfleet_V1_DeviceEvent? {
        operatorChangedRate()
        recovery.withLock { state in
            state.pressureActive = false
            state.pressureRange = nil
        }
        return applyPressure(level: level, detail: detail)
    }

    /// Puts the cap in force or lifts it for the node's new level; returns the event to
    /// announce when the rate changed (or could not). The cap is taken from the operator's
    /// rate, not the running one: drop recovery may have stepped below it, and then restores
    /// to the cap, never above it. `replacing` moves the device to a new cap even upwards.
    func applyPressure(level: PressureLevel, detail: String, replacing: Bool = false) -> Capfleet_V1_DeviceEvent? {
        let (applies, policy) = recovery.withLock { ($0.pressurePolicy.applies(at: level), $0.pressurePolicy) }
        guard applies else { return liftPressureCap(reason: "pressure fell to \(level)") }
        let format = source.device.formats[source.activeFormatIndex]
        let running = source.activeFrameRateRange
        enum Step { case none, cannot(Double), set(FrameRateRange) }
        let step: Step = recovery.withLock { state in
            guard !state.pressureActive else { return .none }
            state.pressureActive = true
            let requested = state.requested ?? running
            state.requested = requested
            guard let rate = policy.cappedRate(running: requested.maxFramesPerSecond, format: format) else {
                // The operator's rate is within the cap already, or the format has nothing slower.
                return requested.maxFramesPerSecond > policy.frameRate + 1e-9 ? .cannot(requested.maxFramesPerSecond) : .none
            }
            let range = FrameRateRange(min: min(rate, requested.minFramesPerSecond), max: rate)
            state.pressureRange = range
            let dropRecoveryBelow = state.recovery.loweredRate.map { $0 < rate - 1e-9 } ?? false
            if running.maxFramesPerSecond > rate + 1e-9 {
                // Above the cap: the cap replaces any drop-recovery step.
                state.recovery.operatorChangedRate()
                return .set(range)
            }
            if replacing && !dropRecoveryBelow && abs(running.maxFramesPerSecond - rate) > 1e-9 { return .set(range) }
            return .none
        }
        switch step {
        case .none:
            return nil
        case let .cannot(rate):
            return policyEvent("pressure policy cannot lower the frame rate from \(VideoFormat.trim(rate)) fps to \(VideoFormat.trim(policy.frameRate)) fps: the active format has no rate at or below it (\(detail))")
        case let .set(range):
            let verb = range.maxFramesPerSecond < running.maxFramesPerSecond ? "lowered" : "raised"
            do {
                try source.setFrameRateRange(range)
            } catch {
                return policyEvent("pressure policy cannot set the frame rate to \(VideoFormat.trim(range.maxFramesPerSecond)) fps: \(error) (\(detail))")
            }
            return policyEvent("pressure policy \(verb) the frame rate to \(VideoFormat.trim(range.maxFramesPerSecond)) fps: pressure \(detail)")
        }
    }

    private func liftPressureCap(reason: String) -> Capfleet_V1_DeviceEvent? {
        let restore: FrameRateRange?? = recovery.withLock { state in
            guard state.pressureActive else { return .none }
            state.pressureActive = false
            defer { state.pressureRange = nil }
            guard state.pressureRange != nil, let requested = state.requested else { return .some(nil) }
            state.recovery.operatorChangedRate()
            return .some(requested)
        }
        guard case let .some(.some(requested)) = restore else { return nil }
        do {
            try source.setFrameRateRange(requested)
        } catch {
            return policyEvent("pressure policy cannot restore the frame rate to \(VideoFormat.trim(requested.maxFramesPerSecond)) fps: \(error)")
        }
        return policyEvent("pressure policy restored the frame rate to \(VideoFormat.trim(requested.maxFramesPerSecond)) fps: \(reason)")
    }

    private func policyEvent(_ message: String) -> Capfleet_V1_DeviceEvent {
        .with {
            $0.deviceID = source.device.deviceID
            $0.kind = .policyActed
            $0.message = message
            $0.unixMs = Int64(Date().timeIntervalSince1970 * 1000)
        }
    }
}
