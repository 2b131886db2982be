/// One camera as its agent enforces it, in one value: consent and whether real pixels are
/// leaving, the take it is recorded for, whether it should capture (the coordinator asked,
/// the agent has not suspended it) and whether its source runs, the device's own
/// interruptions, and the frame rate's policies. Every change is one step from one state to
/// the next, so consent, recording, pressure and drop recovery never disagree half-way.
///
/// Pure: no locks, no I/O, time given as a value. Events go in; actions come out, for the
/// agent to perform (start or stop the source on its own thread, set a frame rate, tell the
/// coordinator, tell the recording path, switch the recording light). Each captured frame is
/// one more step (`frameCaptured`, in DeviceState+Frames.swift).
public struct DeviceState: Sendable {
    public enum Event: Sendable {
        /// Enforced from the next frame on. Losing consent stops real frames and ends a take
        /// in progress at once, keeping its unsent frames on this host.
        case consentChanged(ConsentState, deviceDrops: DropTally)
        /// The recording marker of a coordinator that records without takes.
        case recordingMarked(Bool)
        /// This device's part of a take begins at `startFleet` (said again at every registration).
        case takeBegan(takeID: String, startFleet: UInt64, deviceDrops: DropTally)
        /// A stop for the take: now, or at `stopFleet` when that is still ahead of `nowFleet`
        /// and `cause` lets the part run on until then.
        case takeStopAsked(takeID: String, stopFleet: UInt64?, nowFleet: UInt64?, cause: TakeStopCause, deviceDrops: DropTally)
        /// The clock passed the stop instant with no frame after it.
        case takeStopDue(nowFleet: UInt64, deviceDrops: DropTally)
        /// Frames of the take the recording path refused at the hand-off, on the capture
        /// thread: out of buffers, or its encoder's queue is full (encoder_late). What an
        /// encoder loses later, on its own thread, its packets carry (`EncoderDropOrder`).
        case takeHandoffDropped(takeID: String, reason: DropReason, count: UInt64)
        /// The coordinator welcomed the node: capture (unless suspended).
        case captureWanted
        /// The node stops or was revoked: no frame may leave from now on.
        case captureUnwanted
        /// What the device's thread did with the source.
        case sourceStarted
        case sourceFailedToStart
        case sourceStopped
        /// The agent stops the device for reasons of its own (shutdown pressure) and reports it.
        case suspended(Interruption)
        case suspensionLifted(reason: String)
        /// The device stopped delivering by itself (unplugged, busy), or came back.
        case deviceInterrupted(Interruption)
        case deviceResumed
        /// The operator set the rate, or a format that changed it; `running` is what the device runs now.
        case operatorSetRate(running: FrameRateRange, pressure: PressureReading, format: VideoFormat)
        /// The operator chose another format; it may have moved the rate (one the format cannot
        /// run), and cancelled a zoom ramp or clamped the factor (`ZoomRamp.adopting`).
        case formatChanged(
            rateBefore: FrameRateRange, running: FrameRateRange, pressure: PressureReading, format: VideoFormat,
            zoom: ZoomFormatChange? = nil)
        case dropRecoveryPolicyChanged(DropRecoveryPolicy)
        case pressurePolicyChanged(PressurePolicy, pressure: PressureReading, running: FrameRateRange, format: VideoFormat)
        case pressureChanged(PressureReading, running: FrameRateRange, format: VideoFormat)
        /// Once a second: the device's running totals, for drop recovery.
        case dropIntervalEnded(framesCaptured: UInt64, lateDrops: UInt64, running: FrameRateRange, format: VideoFormat)
    }

    public enum Action: Sendable, Equatable {
        /// Real pixels began or stopped leaving the host: the recording light follows.
        case realFrames(flowing: Bool)
        /// Start or stop the source, on the device's own thread; it reports back with
        /// `sourceStarted`, `sourceFailedToStart` or `sourceStopped`.
        case startSource
        case stopSource
        /// Set the device's frame rates, on its own thread, and announce the outcome.
        case setFrameRate(RateChange)
        /// Tell the coordinator.
        case notify(DeviceNotice)
        /// Tell the recording path.
        case beginTake(takeID: String)
        case endTake(TakeEnd)
        /// Frames of the take in progress its recording path refused: the device's counters
        /// say them too. Never for a take already ended, so the device's count and the
        /// part's agree (a frame refused after the part's end is not the part's, nor a drop).
        case countTakeDrops(reason: DropReason, count: UInt64)
    }

    public enum SourcePhase: Sendable, Equatable {
        case stopped, starting, running, stopping
    }

    public private(set) var consent: ConsentState
    /// Real frames are leaving (the last frame sent was real).
    public internal(set) var realFramesFlowing = false
    public private(set) var take: TakeInProgress?
    private var markedRecording = false
    public private(set) var rates = FrameRateGovernor()
    public private(set) var source = SourcePhase.stopped
    public private(set) var suspension: Interruption?
    public private(set) var deviceInterruption: Interruption?
    private var captureWanted = false
    /// The source ran once: a suspension is reported, and lifting it starts it again.
    private var hasStreamed = false
    /// Why capture is starting again, said once the source runs.
    private var resumeReason: String?
    // The frame step's own (DeviceState+Frames.swift).
    var gaps = SequenceGapDetector()
    var outOfBuffersSeen: UInt64 = 0

    public init(consent: ConsentState = .notDetermined) {
        self.consent = consent
    }

    /// The coordinator wants frames and the agent has not suspended the device: frames
    /// captured now may leave (as consent allows).
    public var shouldCapture: Bool { captureWanted && suspension == nil }
    /// The source runs and its frames are wanted.
    public var isCapturing: Bool { shouldCapture && source == .running }
    /// Capturing and the device delivering.
    public var isStreaming: Bool { isCapturing && deviceInterruption == nil }
    public var isRecording: Bool { markedRecording || take != nil }
    /// Why the device delivers nothing now, if it does not.
    public var interruption: Interruption? { suspension ?? deviceInterruption }
    public var realFramesLeaving: Bool { realFramesFlowing && isStreaming }

    /// One event; `now` (Unix ms) stamps what is announced.
    public mutating func handle(_ event: Event, at now: Int64) -> [Action] {
        switch event {
        case let .consentChanged(state, deviceDrops):
            return consentChanged(to: state, deviceDrops: deviceDrops)
        case let .recordingMarked(marked):
            markedRecording = marked
            return []
        case let .takeBegan(takeID, startFleet, deviceDrops):
            if take?.takeID != takeID { take = TakeInProgress(takeID: takeID, start: startFleet, deviceDrops: deviceDrops) }
            // Said again at every registration: the recording path takes the part up again if it dropped it.
            return [.beginTake(takeID: takeID)]
        case let .takeStopAsked(takeID, stopFleet, nowFleet, cause, deviceDrops):
            guard var current = take, current.takeID == takeID else { return [] }
            guard current.stopAsked(at: stopFleet, nowFleet: nowFleet, withholding: cause.withholds) else {
                take = current
                return []
            }
            return endTake(reason: cause.reason, withholding: cause.withholds, deviceDrops: deviceDrops)
        case let .takeStopDue(nowFleet, deviceDrops):
            guard let current = take, current.isDue(nowFleet: nowFleet) else { return [] }
            return endTake(reason: TakeStopCause.stopped.reason, withholding: false, deviceDrops: deviceDrops)
        case let .takeHandoffDropped(takeID, reason, count):
            guard take?.takeID == takeID else { return [] }
            take?.handoffDropped(reason, count: count)
            return [.countTakeDrops(reason: reason, count: count)]
        case .captureWanted:
            captureWanted = true
            return reconcileSource()
        case .captureUnwanted:
            captureWanted = false
            resumeReason = nil
            return stopRealFrames() + reconcileSource()
        case .sourceStarted:
            source = .running
            hasStreamed = true
            deviceInterruption = nil
            var actions: [Action] = []
            if let reason = resumeReason, shouldCapture { actions.append(.notify(.resumed(reason, atUnixMilliseconds: now))) }
            resumeReason = nil
            return actions + reconcileSource()
        case .sourceFailedToStart:
            // Left stopped: the next registration tries again.
            source = .stopped
            captureWanted = false
            resumeReason = nil
            return []
        case .sourceStopped:
            source = .stopped
            deviceInterruption = nil
            return reconcileSource()
        case let .suspended(interruption):
            guard suspension == nil else { return [] }
            suspension = interruption
            // Before the first start nobody has heard of the device yet: nothing to report.
            let report: [Action] = hasStreamed ? [.notify(.interrupted(interruption, atUnixMilliseconds: interruption.sinceUnixMilliseconds))] : []
            return stopRealFrames() + report + reconcileSource()
        case let .suspensionLifted(reason):
            guard suspension != nil else { return [] }
            suspension = nil
            // A device that never ran starts if it was welcomed meanwhile, and says nothing:
            // nobody heard of its suspension.
            if hasStreamed {
                captureWanted = true
                resumeReason = reason
            }
            return reconcileSource()
        case let .deviceInterrupted(interruption):
            deviceInterruption = interruption
            return stopRealFrames() + [.notify(.interrupted(interruption, atUnixMilliseconds: now))]
        case .deviceResumed:
            deviceInterruption = nil
            return [.notify(.resumed("capture resumed by itself", atUnixMilliseconds: now))]
        case let .operatorSetRate(running, pressure, format):
            return rateActions(rates.operatorSetRate(running: running, pressure: pressure, format: format), at: now)
        case let .formatChanged(rateBefore, running, pressure, format, zoom):
            // What the change did to the zoom is the device's own doing: the operator hears it.
            let zoomed: [Action] = zoom.map { [.notify(.zoomChanged($0, atUnixMilliseconds: now))] } ?? []
            // A format that kept the rate changes nothing the policies hold; one that moved it
            // moved the operator's rate, which the policies restore to from now on.
            guard running != rateBefore else { return zoomed }
            return zoomed + rateActions(rates.operatorSetRate(running: running, pressure: pressure, format: format), at: now)
        case let .dropRecoveryPolicyChanged(policy):
            return rateActions(rates.setDropRecoveryPolicy(policy), at: now)
        case let .pressurePolicyChanged(policy, pressure, running, format):
            return rateActions(rates.setPressurePolicy(policy, pressure: pressure, running: running, format: format), at: now)
        case let .pressureChanged(pressure, running, format):
            return rateActions(rates.pressureChanged(pressure, running: running, format: format), at: now)
        case let .dropIntervalEnded(framesCaptured, lateDrops, running, format):
            return rateActions(
                rates.dropIntervalEnded(framesCaptured: framesCaptured, lateDrops: lateDrops, running: running, format: format), at: now)
        }
    }

    private mutating func consentChanged(to state: ConsentState, deviceDrops: DropTally) -> [Action] {
        let wasAllowed = consent.allowsRealFrames
        consent = state
        guard !state.allowsRealFrames else { return [] }
        var actions = stopRealFrames()
        // Consent withdrawn mid-take: the take ends with it, in the same step.
        if wasAllowed, take != nil {
            actions += endTake(reason: TakeStopCause.consentWithdrawn.reason, withholding: true, deviceDrops: deviceDrops)
        }
        return actions
    }

    mutating func endTake(reason: String, withholding: Bool, deviceDrops: DropTally) -> [Action] {
        guard let ended = take else { return [] }
        take = nil
        return [.endTake(TakeEnd(takeID: ended.takeID, drops: ended.drops(deviceDrops: deviceDrops), reason: reason, withholding: withholding))]
    }

    private mutating func stopRealFrames() -> [Action] {
        guard realFramesFlowing else { return [] }
        realFramesFlowing = false
        return [.realFrames(flowing: false)]
    }

    /// At most one start or stop is under way: the next is decided when it reports back.
    private mutating func reconcileSource() -> [Action] {
        switch source {
        case .stopped where shouldCapture:
            source = .starting
            return [.startSource]
        case .running where !shouldCapture:
            source = .stopping
            return [.stopSource]
        default:
            return []
        }
    }

    private func rateActions(_ step: FrameRateGovernor.Step?, at now: Int64) -> [Action] {
        switch step {
        case nil: []
        case let .set(change)?: [.setFrameRate(change)]
        case let .announce(message)?: [.notify(.policyActed(message, atUnixMilliseconds: now))]
        }
    }
}

/// What a device tells the coordinator (a device event).
public enum DeviceNotice: Sendable, Equatable {
    case interrupted(Interruption, atUnixMilliseconds: Int64)
    case resumed(String, atUnixMilliseconds: Int64)
    case policyActed(String, atUnixMilliseconds: Int64)
    /// A format change cancelled the zoom's ramp or clamped its factor.
    case zoomChanged(ZoomFormatChange, atUnixMilliseconds: Int64)
}

/// Why the coordinator ends a device's part of a take (SetRecording).
public enum TakeStopCause: Sendable, Equatable {
    /// The take stops: frames captured before the stop instant are still sent.
    case stopped
    /// Consent was denied, revoked or restricted: the part ends now, unsent frames stay here.
    case consentWithdrawn
    /// Another device refused the start, so the take never started: the part ends now and
    /// nothing of it is sent.
    case notStarted

    /// The part ends now, and what it has not sent is dropped instead of sent.
    public var withholds: Bool { self != .stopped }

    /// As the part's end says it (RecordEnd's reason, the agent's log).
    public var reason: String {
        switch self {
        case .stopped: "stopped"
        case .consentWithdrawn: "consent denied"
        case .notStarted: "take not started"
        }
    }
}

/// A device's part of a take ends: the recording path sends what it holds (or, withholding,
/// drops what it has not sent) and closes the part with the take's drops and why.
public struct TakeEnd: Sendable, Equatable {
    public var takeID: String
    public var drops: DropTally
    public var reason: String
    public var withholding: Bool

    public init(takeID: String, drops: DropTally, reason: String, withholding: Bool) {
        self.takeID = takeID
        self.drops = drops
        self.reason = reason
        self.withholding = withholding
    }
}
