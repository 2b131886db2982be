import FleetCapture
import FleetCore
import FleetProtocol
import Foundation

/// Commands from the coordinator, on the control thread. What the agent can decide alone
/// (consent, takes, frame alignment) is answered at once; what touches a device (format,
/// rate, zoom, focus, rate policies) is queued on the device's own thread and answered
/// from there once done, so the control thread never waits on an ioctl.
extension AgentService {
    func execute(_ command: Capfleet_V1_Command, parts: AgentParts) -> Capfleet_V1_CommandReply? {
        let clock = parts.clock
        if let microphone = microphones.first(where: { $0.deviceID == command.deviceID }) {
            return .with {
                $0.commandID = command.commandID
                $0.status = microphoneCommand(command, on: microphone, parts: parts)
            }
        }
        if let sensors = parts.sensors, sensors.owns(command.deviceID) {
            return .with {
                $0.commandID = command.commandID
                $0.status = sensorCommand(command, on: sensors)
            }
        }
        guard let stream = sources.first(where: { $0.deviceID == command.deviceID }) else {
            return .with {
                $0.commandID = command.commandID
                $0.status = .failure(.notFound, "device \(command.deviceID) is not on node \(identity.nodeID)")
            }
        }
        let change: Reconfiguration
        switch command.action {
        case let .findFirstFrame(request)?:
            return findFirstFrame(request, commandID: command.commandID, on: stream, clock: clock)
        case let .captureStill(request)?:
            return captureStill(request, commandID: command.commandID, on: stream, parts: parts)
        case let .setDetection(request)?:
            return setDetection(request, command: command, on: stream)
        case let .auditExposures(request)?:
            return auditExposures(request, commandID: command.commandID, on: stream, clock: clock)
        case .setAudioProcessing?:
            return reply(
                to: command, .failure(.unsupported, "device \(command.deviceID) is a camera: audio processing is for microphones"), on: stream)
        case let .setControl(request)?:
            return setControl(request, command: command, on: stream)
        case let .setRegion(request)?:
            return setRegion(request, command: command, on: stream)
        case let .setPreRoll(request)?:
            return setPreRoll(request, command: command, on: stream, encoders: parts.encoders)
        case let .setFrameAlignment(request)? where !request.triggerLine.isEmpty || !request.outputLine.isEmpty || stream.isWired:
            return setWiredAlignment(request, command: command, on: stream)
        case let .setFrameAlignment(request)?:
            let steered = stream.setFrameAlignment(origin: request.enabled ? request.gridOriginFleetNs : nil)
            logger.notice(
                "frame alignment",
                metadata: [
                    "device.id": "\(command.deviceID)",
                    "alignment": "\(request.enabled ? (steered ? "steered" : "phase only") : "off")",
                ])
            return .with {
                $0.commandID = command.commandID
                $0.status =
                    steered
                    ? .ok
                    : .failure(
                        .unsupported,
                        "device \(command.deviceID) cannot adjust its frame timing (\(stream.source.steeringUnavailableReason)); it reports its phase and drift against the grid instead"
                    )
            }
        case let .setRecording(request)? where !request.take.isEmpty:
            return .with {
                $0.commandID = command.commandID
                $0.status = record(request, on: stream, parts: parts)
            }
        case let .setRecording(request)?:
            stream.markRecording(request.recording)
            return reply(to: command, .ok, on: stream)
        case let .setConsent(request)?:
            return reply(to: command, setConsent(request, on: stream), on: stream)
        case nil:
            return reply(to: command, .failure(.badRequest, "command \(command.commandID) carries no action"), on: stream)
        case let .setActiveFormat(request)?:
            change = .format(index: Int(request.formatIndex))
        case let .setFrameRate(request)?:
            let slowest = request.minFramesPerSecond > 0 ? request.minFramesPerSecond : request.framesPerSecond
            change = .frameRate(FrameRateRange(min: slowest, max: request.framesPerSecond))
        case let .setFocus(request)?:
            change = .focus(FocusRequest(wire: request))
        case let .setDropRecovery(request)?:
            change = .dropRecovery(DropRecoveryPolicy(wire: request.policy))
        case let .setPressurePolicy(request)?:
            change = .pressurePolicy(PressurePolicy(wire: request.policy))
        case let .setZoom(request)?:
            guard stream.source.zoomMethod != nil else {
                return reply(to: command, .failure(.unsupported, "device \(command.deviceID) cannot zoom"), on: stream)
            }
            change = .zoom(request.cancel ? .cancel : request.rampRate > 0 ? .ramp(to: request.factor, rate: request.rampRate) : .set(request.factor))
        }
        stream.reconfigure(change, pressure: { parts.pressure }) { [self] result in
            let status: Capfleet_V1_Status
            switch result {
            case .success:
                logger.info("command applied", metadata: ["device.id": "\(command.deviceID)", "command.id": "\(command.commandID)"])
                status = .ok
            case let .failure(error):
                status = .failure(error.isUnavailable ? .unavailable : .unsupported, error.description)
            }
            control.post(reply: reply(to: command, status, on: stream))
        }
        return nil
    }

    /// Detection settings: checked and applied on the device's thread (loading a face cascade
    /// takes a moment the control thread must not wait for), answered from there.
    private func setDetection(_ request: Capfleet_V1_SetDetection, command: Capfleet_V1_Command, on stream: CameraStream) -> Capfleet_V1_CommandReply?
    {
        let settings: DetectionSettings
        do {
            settings = try DetectionSettings(wire: request.settings)
        } catch {
            return reply(to: command, .failure(.badRequest, error.description), on: stream)
        }
        stream.onDeviceThread { [self] in
            let status: Capfleet_V1_Status
            do {
                try stream.applyDetection(settings)
                logger.notice(
                    "detection",
                    metadata: [
                        "device.id": "\(stream.deviceID)", "codes": "\(settings.codes.map(\.rawValue).joined(separator: ","))",
                        "faces": "\(settings.faces)", "fps": "\(settings.framesPerSecond)",
                    ])
                status = .ok
            } catch {
                status = .failure(.unsupported, "device \(stream.deviceID) cannot detect that: \(error)")
            }
            control.post(reply: reply(to: command, status, on: stream))
        }
        return nil
    }

    /// One control: set on the device's thread (a driver call, or a register write across the
    /// network for a GenICam camera), answered from there with the control as read back.
    /// Alignment of a camera wired to others (clock.md, "Hardware-line triggers"), or one that
    /// was: its lines are set on the device thread, and the reply posted from there.
    private func setWiredAlignment(
        _ request: Capfleet_V1_SetFrameAlignment, command: Capfleet_V1_Command, on stream: CameraStream
    ) -> Capfleet_V1_CommandReply? {
        let wiring = LineWiring(
            triggerLine: request.triggerLine, sourceDeviceID: request.lineSourceDeviceID, outputLine: request.outputLine)
        stream.onDeviceThread { [self] in
            var answer: Capfleet_V1_CommandReply
            do throws(CaptureError) {
                try stream.setWiredAlignment(origin: request.enabled ? request.gridOriginFleetNs : nil, wiring: wiring)
                logger.notice(
                    "frame alignment",
                    metadata: [
                        "device.id": "\(stream.deviceID)", "alignment": "\(request.enabled ? "on" : "off")",
                        "trigger_line": "\(wiring.triggerLine)",
                        "line_source": "\(wiring.sourceDeviceID.isEmpty ? "external" : wiring.sourceDeviceID)",
                        "output_line": "\(wiring.outputLine)",
                    ])
                answer = reply(to: command, .ok, on: stream)
            } catch {
                stream.alignment.triggerModeFailed(error.description)
                answer = reply(to: command, .failure(error.isUnavailable ? .unavailable : .unsupported, error.description), on: stream)
            }
            control.post(reply: answer)
        }
        return nil
    }

    private func setControl(_ request: Capfleet_V1_SetControl, command: Capfleet_V1_Command, on stream: CameraStream) -> Capfleet_V1_CommandReply? {
        answerOnDeviceThread(command, on: stream) { [self] () throws(CaptureError) -> Fill in
            if request.controlID == DeviceControl.panAbsoluteID || request.controlID == DeviceControl.tiltAbsoluteID {
                try stream.refuseWhileOpticsFrame(control: request.controlID == DeviceControl.panAbsoluteID ? "pan_absolute" : "tilt_absolute")
            }
            let applied = try stream.source.setControl(id: request.controlID, value: request.value)
            logger.notice(
                "control",
                metadata: ["device.id": "\(stream.deviceID)", "control": "\(applied.name)", "value": "\(applied.value.map(String.init) ?? "?")"])
            return { $0.control = applied.wire }
        }
    }

    /// The region of interest: moved on the device's thread (register writes and a restart of
    /// the stream), answered from there with the window as placed.
    private func setRegion(_ request: Capfleet_V1_SetRegion, command: Capfleet_V1_Command, on stream: CameraStream) -> Capfleet_V1_CommandReply? {
        answerOnDeviceThread(command, on: stream) { [self] () throws(CaptureError) -> Fill in
            let placed = try stream.source.setRegion(request.centred ? .centred : .at(left: Int(request.left), top: Int(request.top)))
            logger.notice(
                "region of interest",
                metadata: ["device.id": "\(stream.deviceID)", "region": "\(placed.width)x\(placed.height) at \(placed.left),\(placed.top)"])
            return { $0.region = placed.wire }
        }
    }

    /// What a change adds to its answer.
    typealias Fill = @Sendable (inout Capfleet_V1_CommandReply) -> Void

    /// Runs `change` on the device's thread and answers from there, with the device's settings
    /// as it left them: OK with what it fills in, BAD_REQUEST for a value the device refused,
    /// else UNAVAILABLE or UNSUPPORTED.
    private func answerOnDeviceThread(
        _ command: Capfleet_V1_Command, on stream: CameraStream, _ change: @escaping @Sendable () throws(CaptureError) -> Fill
    ) -> Capfleet_V1_CommandReply? {
        stream.onDeviceThread { [self] in
            var answer: Capfleet_V1_CommandReply
            do throws(CaptureError) {
                let fill = try change()
                answer = reply(to: command, .ok, on: stream)
                fill(&answer)
            } catch {
                switch error {
                case .controlRefused, .regionRefused:
                    answer = reply(to: command, .failure(.badRequest, error.description), on: stream)
                default:
                    answer = reply(to: command, .failure(error.isUnavailable ? .unavailable : .unsupported, error.description), on: stream)
                }
            }
            control.post(reply: answer)
        }
        return nil
    }

    /// The camera's pre-roll (recordings.md, "Pre-roll"): applied at once, on the control
    /// thread (it only resizes what the capture thread keeps), answered with what is kept.
    private func setPreRoll(
        _ request: Capfleet_V1_SetPreRoll, command: Capfleet_V1_Command, on stream: CameraStream, encoders: TakeEncoders
    ) -> Capfleet_V1_CommandReply {
        let settings = PreRollSettings(command: request)
        if let refusal = settings.refusal { return reply(to: command, .failure(.badRequest, "device \(stream.deviceID): \(refusal)"), on: stream) }
        if let encoding = settings.encoding, settings.isOn {
            if encoders.catalog.encoders(for: encoding.codec).isEmpty {
                return reply(
                    to: command,
                    .failure(
                        .unavailable,
                        "node \(identity.nodeID) has no \(encoding.codec.rawValue) encoder to keep the pre-roll of \(stream.deviceID) in"),
                    on: stream)
            }
            let format = stream.source.device.formats[stream.source.activeFormatIndex]
            if let problem = encoding.problem(recording: format.pixelFormat, of: stream.deviceID) {
                return reply(to: command, .failure(.badRequest, problem), on: stream)
            }
        }
        // The encoder first: the ring takes packets from the moment it is told it keeps them.
        encoders.preRollChanged(on: stream, to: settings)
        // Device ids are file names already (their takes' folders are named so).
        stream.preRoll.useDisk(
            for: settings, directory: configuration.stateDirectory + "/pre-roll/" + stream.deviceID, deviceID: stream.deviceID, logger: logger)
        stream.preRoll.change(to: settings)
        logger.notice(
            "pre-roll",
            metadata: [
                "device.id": "\(stream.deviceID)",
                "pre_roll": "\(settings.isOn ? "\(settings.seconds) s within \(settings.budgetBytes >> 20) MiB" : "off")",
                "disk": "\(settings.spillsToDisk ? "\(settings.diskBudgetBytes >> 20) MiB" : "none")",
            ])
        var answer = reply(to: command, .ok, on: stream)
        answer.preRoll = stream.preRoll.figures ?? settings.wire
        return answer
    }

    /// A device command's reply: its status and the device's settings after it.
    private func reply(to command: Capfleet_V1_Command, _ status: Capfleet_V1_Status, on stream: CameraStream) -> Capfleet_V1_CommandReply {
        let state = stream.state
        return .with {
            $0.commandID = command.commandID
            $0.status = status
            $0.activeFormatIndex = UInt32(stream.source.activeFormatIndex)
            $0.activeFrameRate = stream.source.activeFrameRate
            $0.activeMinFrameRate = stream.source.activeFrameRateRange.minFramesPerSecond
            $0.zoomFactor = stream.source.zoomFactor
            $0.zoomMethod = stream.source.zoomMethod?.wire ?? .unspecified
            if let focus = stream.source.focus { $0.focus = focus.wire }
            $0.dropRecovery = state.rates.dropRecovery.policy.wire
            $0.pressurePolicy = state.rates.pressurePolicy.wire(active: state.rates.pressureActive)
            $0.consent = state.consent.wire
        }
    }

    private func setConsent(_ request: Capfleet_V1_SetConsent, on stream: CameraStream) -> Capfleet_V1_Status {
        switch storeConsent(request, deviceID: stream.deviceID) {
        case let .failure(refusal): return refusal.status
        case .success(nil): return .ok
        case let .success(state?):
            if stream.consent != state {
                logger.notice(
                    "consent", metadata: ["device.id": "\(stream.deviceID)", "consent": "\(state.rawValue)", "reason": "\(request.reason)"])
            }
            stream.setConsent(state)
            return .ok
        }
    }

    /// A consent change stored before it is enforced and answered, so that a crash right
    /// after still knows it: the state to enforce, nil when a newer change already holds, or
    /// the reply's failure.
    private func storeConsent(_ request: Capfleet_V1_SetConsent, deviceID: String) -> Result<ConsentState?, ConsentRefusal> {
        guard let state = ConsentState(wire: request.state) else {
            return .failure(ConsentRefusal(.failure(.badRequest, "consent state \(request.state) is not one this agent knows; nothing changed")))
        }
        do {
            guard
                try consentBook.record(
                    .init(state: state, reason: request.reason, changedUnixMilliseconds: request.changedUnixMs),
                    for: deviceID)
            else {
                // Overtaken by a newer change already enforced: the reply says what holds.
                logger.info(
                    "older consent change ignored",
                    metadata: ["device.id": "\(deviceID)", "consent": "\(state.rawValue)", "changed_unix_ms": "\(request.changedUnixMs)"])
                return .success(nil)
            }
        } catch {
            // A denial is enforced even if it cannot be written; a grant is not.
            if state.allowsRealFrames { return .failure(ConsentRefusal(.failure(.internal, "\(error)"))) }
            logger.error("cannot store consent", metadata: ["device.id": "\(deviceID)", "error": "\(error)"])
        }
        return .success(state)
    }

    /// A command for one of the agent's microphones: consent, processing, pre-roll and takes.
    private func microphoneCommand(_ command: Capfleet_V1_Command, on microphone: Microphone, parts: AgentParts) -> Capfleet_V1_Status {
        if case let .setRecording(request)? = command.action { return record(request, on: microphone, parts: parts) }
        if case let .setPreRoll(request)? = command.action {
            // A microphone's pre-roll is its FLAC blocks in memory: no encoding, no disk.
            let settings = PreRollSettings(
                wire: .with {
                    $0.milliseconds = request.milliseconds
                    $0.budgetBytes = request.budgetBytes
                })
            if request.diskBudgetBytes > 0 {
                return .failure(.badRequest, "device \(command.deviceID) is a microphone: its pre-roll is kept in memory, with no disk budget")
            }
            if let refusal = settings.refusal { return .failure(.badRequest, "device \(command.deviceID): \(refusal)") }
            microphone.setPreRoll(settings)
            logger.notice(
                "pre-roll",
                metadata: [
                    "device.id": "\(command.deviceID)",
                    "pre_roll": "\(settings.isOn ? "\(settings.seconds) s within \(settings.budgetBytes >> 20) MiB" : "off")",
                ])
            return .ok
        }
        if case let .setAudioProcessing(request)? = command.action {
            let settings = AudioProcessingSettings(wire: request.processing)
            do {
                try microphone.setProcessing(settings)
            } catch {
                return .failure(.badRequest, "device \(command.deviceID) cannot process its sound so: \(error)")
            }
            logger.notice("audio processing", metadata: ["device.id": "\(command.deviceID)", "processing": "\(settings.summary)"])
            return .ok
        }
        guard case let .setConsent(request)? = command.action else {
            let what = command.action.map { "\($0)".prefix(while: { $0 != "(" }) } ?? "no action"
            return .failure(
                .unsupported, "device \(command.deviceID) is a microphone: it takes consent, processing, pre-roll and takes only, not \(what)")
        }
        switch storeConsent(request, deviceID: command.deviceID) {
        case let .failure(refusal): return refusal.status
        case .success(nil): return .ok
        case let .success(state?):
            if microphone.isAllowed != state.allowsRealFrames {
                logger.notice(
                    "consent", metadata: ["device.id": "\(command.deviceID)", "consent": "\(state.rawValue)", "reason": "\(request.reason)"])
            }
            microphone.setConsent(state)
            return .ok
        }
    }

    /// A take begins or ends for the microphone (microphones.md, "In takes"): its 10 ms FLAC
    /// frames from `start_fleet_ns` on go on the recording path or to this host's disk.
    private func record(_ request: Capfleet_V1_SetRecording, on microphone: Microphone, parts: AgentParts) -> Capfleet_V1_Status {
        let (clock, recorder, takeStore) = (parts.clock, parts.recorder, parts.takeStore)
        let deviceID = microphone.deviceID
        if request.recording {
            guard clock.latest.estimate != nil else {
                return .failure(
                    .unavailable, "node \(identity.nodeID)'s clock is not synchronised yet: its sound has no fleet time to place it in a take")
            }
            var path: any TakeFramePath = recorder
            if request.store == .agent {
                do {
                    let prepared = try takeStore.prepare(
                        takeID: request.take, deviceID: deviceID, start: request.startFleetNs, segmentSeconds: Int(request.segmentSeconds),
                        title: request.title,
                        frameRate: Double(microphone.source.format.sampleRate) / Double(Microphone.chunkFrames(microphone.source.format)),
                        agentInstance: agentInstance)
                    if prepared == .alreadyEnded { return .ok }
                } catch {
                    return .failure(.unavailable, "node \(identity.nodeID) cannot record \(deviceID): \(error)")
                }
                path = takeStore
            }
            microphone.beginTake(takeID: request.take, start: request.startFleetNs, recordingPath: path)
            logger.notice(
                "recording",
                metadata: [
                    "device.id": "\(deviceID)", "take.id": "\(request.take)", "start.fleet_ns": "\(request.startFleetNs)",
                    "store": "\(request.store == .agent ? "agent" : "coordinator")", "codec": "flac",
                ])
            return .ok
        }
        if request.stopFleetNs != 0 { takeStore.stop(takeID: request.take, deviceID: deviceID, at: request.stopFleetNs) }
        let now = clock.stamp(captureMonotonic: MonotonicTime.now())?.fleet
        let stop = request.stopFleetNs == 0 ? nil : request.stopFleetNs
        let cause = TakeStopCause(request)
        microphone.stopTake(takeID: request.take, stop: stop, nowFleet: now, cause: cause)
        endByTheClock(stop: stop, now: now, clock: clock) { [microphone] in microphone.endTakeIfDue(nowFleet: $0) }
        logger.notice("recording stops", metadata: ["device.id": "\(deviceID)", "take.id": "\(request.take)", "reason": "\(cause.reason)"])
        return .ok
    }

    /// A device that captures nothing after a stop instant still ahead ends its part by the
    /// clock instead, half a second after it.
    private func endByTheClock(stop: UInt64?, now: UInt64?, clock: ClockSync, end: @escaping @Sendable (UInt64) -> Void) {
        guard let stop, let now, stop > now else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + Double(stop - now) / 1e9 + 0.5) {
            guard let now = clock.stamp(captureMonotonic: MonotonicTime.now())?.fleet else { return }
            end(now)
        }
    }

    /// A command for one of the agent's sensor streams: consent is all they take; the rest are
    /// camera commands.
    private func sensorCommand(_ command: Capfleet_V1_Command, on sensors: SensorEndpoint) -> Capfleet_V1_Status {
        guard case let .setConsent(request)? = command.action else {
            let what = command.action.map { "\($0)".prefix(while: { $0 != "(" }) } ?? "no action"
            return .failure(
                .unsupported,
                "device \(command.deviceID) is a sensor stream: it takes consent only, not \(what) (formats, rates, zoom, focus, takes and stills are for cameras)"
            )
        }
        switch storeConsent(request, deviceID: command.deviceID) {
        case let .failure(refusal): return refusal.status
        case .success(nil): return .ok
        case let .success(state?):
            if sensors.isAllowed(deviceID: command.deviceID) != state.allowsRealFrames {
                logger.notice(
                    "consent", metadata: ["device.id": "\(command.deviceID)", "consent": "\(state.rawValue)", "reason": "\(request.reason)"])
            }
            sensors.setAllowed(state.allowsRealFrames, deviceID: command.deviceID)
            return .ok
        }
    }

    /// A take begins or ends for the device: its frames from `start_fleet_ns` on go on the
    /// recording path until `stop_fleet_ns`.
    private func record(_ request: Capfleet_V1_SetRecording, on stream: CameraStream, parts: AgentParts) -> Capfleet_V1_Status {
        let (clock, recorder, takeStore) = (parts.clock, parts.recorder, parts.takeStore)
        let deviceID = stream.deviceID
        if request.recording {
            guard clock.latest.estimate != nil else {
                return .failure(
                    .unavailable, "node \(identity.nodeID)'s clock is not synchronised yet: its frames have no fleet time to place them in a take")
            }
            var path: any TakeFramePath
            if request.store == .agent {
                do {
                    let prepared = try takeStore.prepare(
                        takeID: request.take, deviceID: deviceID, start: request.startFleetNs,
                        segmentSeconds: Int(request.segmentSeconds), title: request.title,
                        frameRate: stream.source.activeFrameRate, agentInstance: agentInstance)
                    // Ended here already (while the coordinator could not hear it): the link reports it.
                    if prepared == .alreadyEnded { return .ok }
                } catch {
                    return .failure(.unavailable, "node \(identity.nodeID) cannot record \(deviceID): \(error)")
                }
                path = takeStore
            } else {
                path = recorder
            }
            if let encoding = TakeEncoding(wire: request.encoding), encoding.codec != .raw {
                path = parts.encoders.path(
                    for: TakeDeviceKey(takeID: request.take, deviceID: deviceID), encoding: encoding, takeStart: request.startFleetNs,
                    segmentSeconds: Int(request.segmentSeconds), frameRate: stream.source.activeFrameRate, downstream: path,
                    stream: stream)
            }
            stream.beginTake(takeID: request.take, start: request.startFleetNs, recordingPath: path)
            logger.notice(
                "recording",
                metadata: [
                    "device.id": "\(deviceID)", "take.id": "\(request.take)", "start.fleet_ns": "\(request.startFleetNs)",
                    "store": "\(request.store == .agent ? "agent" : "coordinator")",
                ])
            return .ok
        }
        if request.stopFleetNs != 0 { takeStore.stop(takeID: request.take, deviceID: deviceID, at: request.stopFleetNs) }
        let now = clock.stamp(captureMonotonic: MonotonicTime.now())?.fleet
        let stop = request.stopFleetNs == 0 ? nil : request.stopFleetNs
        let cause = TakeStopCause(request)
        stream.stopTake(takeID: request.take, stop: stop, nowFleet: now, cause: cause)
        endByTheClock(stop: stop, now: now, clock: clock) { [stream] in stream.endTakeIfDue(nowFleet: $0) }
        logger.notice(
            "recording stops",
            metadata: [
                "device.id": "\(deviceID)", "take.id": "\(request.take)",
                "reason": "\(cause.reason)",
            ])
        return .ok
    }

    /// Answers at once if it cannot be answered; otherwise when the frame is captured, or
    /// when the wait runs out.
    private func findFirstFrame(
        _ request: Capfleet_V1_FindFirstFrame, commandID: UInt64, on stream: CameraStream,
        clock: ClockSync
    ) -> Capfleet_V1_CommandReply? {
        @Sendable func reply(_ status: Capfleet_V1_Status, _ timing: Capfleet_V1_FrameTiming? = nil) -> Capfleet_V1_CommandReply {
            .with {
                $0.commandID = commandID
                $0.status = status
                if let timing { $0.frameTiming = timing }
            }
        }
        guard let estimate = clock.latest.estimate else {
            return reply(.failure(.unavailable, "node \(identity.nodeID)'s clock is not synchronised yet: no fleet time to compare with"))
        }
        guard stream.isCapturing else {
            return reply(.failure(.unavailable, "device \(stream.deviceID) is not capturing"))
        }
        // How long until that fleet time, by this node's clock, plus the patience asked for.
        let now = clock.nodeClock.now()
        let localTarget = estimate.mapping.localTime(atFleet: request.fleetTimeNs)
        let untilTarget = localTarget > now ? localTarget - now : 0
        let patience = UInt64(request.timeoutMs == 0 ? 2000 : min(request.timeoutMs, 60_000)) * 1_000_000
        guard untilTarget < 3_600_000_000_000 else {
            return reply(.failure(.badRequest, "fleet time \(request.fleetTimeNs) is more than an hour away"))
        }
        stream.watchFirstFrame(atFleetTime: request.fleetTimeNs, waitingAtMost: untilTarget + patience) { [self] timing in
            let answer =
                timing.map { reply(.ok, $0) }
                ?? reply(.failure(.unavailable, "device \(stream.deviceID) captured no frame at or after that fleet time in time"))
            control.post(reply: answer)
        }
        return nil
    }
}

/// A consent change the agent refused, as its reply's status.
struct ConsentRefusal: Error {
    let status: Capfleet_V1_Status

    init(_ status: Capfleet_V1_Status) { self.status = status }
}

extension TakeStopCause {
    /// Why a SetRecording that stops a take stops it.
    init(_ request: Capfleet_V1_SetRecording) {
        self = request.notStarted ? .notStarted : request.consentStop ? .consentWithdrawn : .stopped
    }
}
