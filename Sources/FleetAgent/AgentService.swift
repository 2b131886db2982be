import FleetBus
import FleetCapture
import FleetCore
import FleetHost
import FleetProtocol
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// One agent: discovers its cameras, registers with the coordinator, streams frames and
/// reports status until it is told to shut down.
public final class AgentService: Service, Sendable {
    public static let softwareVersion = "0.1.0"

    private let configuration: AgentConfiguration
    private let identity: NodeIdentity
    private let sources: [CameraStream]
    private let consentBook: ConsentBook
    private let light: RecordingLight?
    private let logger: Logger
    /// Set once in run(); capture threads post device events through it.
    private let control = Mutex<ControlChannel?>(nil)
    private let monitor = Mutex<PressureMonitor?>(nil)
    /// Set once in run(): the recording path.
    private let recorder = Mutex<RecordSender?>(nil)
    /// Frames and drops of all devices at the last pressure sample, for the drop rate.
    private let lastLoad = Mutex<(frames: UInt64, drops: DropTally)>((0, DropTally()))

    public init(configuration: AgentConfiguration, logger: Logger) throws {
        self.configuration = configuration
        let identity = try NodeIdentity.loadOrCreate(stateDirectory: configuration.stateDirectory)
        self.identity = identity
        var logger = logger
        logger[metadataKey: "node.id"] = "\(identity.nodeID)"
        self.logger = logger
        let book = try ConsentBook(stateDirectory: configuration.stateDirectory)
        consentBook = book
        let light = configuration.realFramesCommand.map { [logger] in RecordingLight(command: $0, nodeID: identity.nodeID, logger: logger) }
        self.light = light
        let announce: @Sendable (String, Bool) -> Void = { [logger] deviceID, flowing in
            logger.notice(flowing ? "real frames leave this host" : "real frames stopped", metadata: ["device.id": "\(deviceID)"])
            light?.set(deviceID: deviceID, on: flowing)
        }
        // Each device starts with the consent this agent last stored: nothing unlocks it but the coordinator.
        sources = try CameraInventory.sources(for: configuration, nodeID: identity.nodeID, logger: logger).map { source in
            CameraStream(source: source, consent: book.state(of: source.device.deviceID), onRealFrames: announce)
        }
    }

    public var nodeID: String { identity.nodeID }

    public func run() async throws {
        let credentials = try await credentials()
        // Encrypting frames must never hold up a heartbeat: frames and control on separate I/O threads.
        let context = ZMQContext.withSeparateLanes()
        let publisher = try FramePublisher(context: context, capacity: configuration.sendQueueCapacity,
                                           coordinatorKey: credentials.coordinatorKey, keys: credentials.keys, logger: logger)
        let clock = try ClockSync(context: context, coordinatorKey: credentials.coordinatorKey, keys: credentials.keys,
                                  nodeClock: configuration.nodeClock, logger: logger)
        if configuration.nodeClock.isSkewed {
            logger.warning("this agent's clock is skewed on purpose (a test setting)",
                           metadata: ["clock.offset_ns": "\(configuration.nodeClock.offset)", "clock.drift_ppm": "\(configuration.nodeClock.driftPPM)"])
        }
        let recorder = try RecordSender(context: context, coordinatorKey: credentials.coordinatorKey, keys: credentials.keys,
                                        limits: configuration.recordSpoolLimits, logger: logger)
        self.recorder.withLock { $0 = recorder }
        let monitor = configuration.pressureEnabled ? makePressureMonitor(publisher: publisher) : nil
        self.monitor.withLock { $0 = monitor }
        let (revocations, revoke) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(1))
        let handlers = ControlHandlers(
            hello: { [self] in hello(name: credentials.nodeName) },
            status: { [self] in
                evaluateDropRecovery()
                var report = status(publisher: publisher)
                report.clock = clock.wire
                return report
            },
            command: { [self] command in execute(command, clock: clock) },
            registered: { [self] port, clockPort, recordPort in
                publisher.connect(to: configuration.ingestEndpoint(port: port))
                if recordPort != 0 { recorder.connect(to: configuration.ingestEndpoint(port: recordPort)) }
                // A coordinator too old to name a clock port has none: frames go without fleet time.
                if clockPort != 0 { clock.connect(to: configuration.ingestEndpoint(port: clockPort)) }
                startStreaming(publisher: publisher, clock: clock)
            },
            revoked: { [self] reason in
                // No frame may leave after this: stop capturing before anything else.
                for stream in sources { stream.stop() }
                revoke.yield(reason)
            })
        let control = try ControlChannel(context: context, endpoint: configuration.controlEndpoint, nodeID: identity.nodeID,
                                         coordinatorKey: credentials.coordinatorKey, keys: credentials.keys,
                                         handlers: handlers, logger: logger)
        self.control.withLock { $0 = control }
        monitor?.start()
        logger.info("agent started", metadata: ["coordinator": "\(configuration.controlEndpoint)", "devices": "\(sources.count)",
                                                "key": "\(credentials.keys.publicKey.fingerprint)…"])
        // Enrolled, cameras open, sockets up: a `Type=notify` unit counts as started from here
        // (registering waits for the coordinator, which may come later).
        SystemdNotifier.ready(status: "\(sources.count) camera(s), coordinator \(configuration.controlEndpoint)")

        let revokedBecause: String? = await withTaskGroup(of: String?.self) { group in
            group.addTask {
                try? await gracefulShutdown()
                return nil
            }
            group.addTask {
                for await reason in revocations { return reason }
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }

        logger.info("agent stopping")
        SystemdNotifier.stopping()
        monitor?.stop()
        for stream in sources { stream.stop() }
        control.stop()
        clock.stop()
        recorder.stop()
        publisher.stop()
        light?.stop()
        if let revokedBecause {
            logger.critical("this node was revoked", metadata: ["reason": "\(revokedBecause)"])
            throw AgentError.revoked(revokedBecause)
        }
    }

    /// The agent's keys: enrolled now with the configured token, or as kept from before.
    private func credentials() async throws -> AgentCredentials {
        let saved = try AgentCredentials.load(stateDirectory: configuration.stateDirectory)
        guard let text = configuration.enrollmentToken else {
            guard let saved else { throw AgentError.notEnrolled(stateDirectory: configuration.stateDirectory) }
            return saved
        }
        let token = try EnrollmentToken(text: text)
        if let saved, saved.enrolledWith == token.keys.publicKey.z85 {
            logger.info("already enrolled with this token; using the saved key (the --enroll flag can go)")
            return saved
        }
        logger.info("enrolling with the coordinator", metadata: ["coordinator": "\(configuration.controlEndpoint)"])
        let credentials = try await Enrollment.enroll(token: token, endpoint: configuration.controlEndpoint, nodeID: identity.nodeID,
                                                      hostname: hostname, softwareVersion: Self.softwareVersion,
                                                      stateDirectory: configuration.stateDirectory, logger: logger)
        logger.notice("enrolled", metadata: ["node.name": "\(credentials.nodeName)", "key": "\(credentials.keys.publicKey.fingerprint)…"])
        return credentials
    }

    /// gethostname(2), not Foundation's hostName, which may wait on a DNS lookup.
    private var hostname: String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "unknown-host" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private func hello(name enrolledName: String) -> Capfleet_V1_Hello {
        .with {
            $0.protocolVersion = WireDefaults.protocolMajor
            $0.protocolMinor = WireDefaults.protocolMinor
            $0.nodeID = identity.nodeID
            $0.nodeName = configuration.nodeName ?? (enrolledName.isEmpty ? hostname : enrolledName)
            $0.hostname = hostname
            $0.softwareVersion = Self.softwareVersion
            $0.bootMonotonicNs = MonotonicTime.now()
            $0.devices = sources.map { stream in
                let source = stream.source
                var descriptor = source.device.wire
                descriptor.activeFormatIndex = UInt32(source.activeFormatIndex)
                descriptor.activeFrameRate = source.activeFrameRate
                descriptor.activeMinFrameRate = source.activeFrameRateRange.minFramesPerSecond
                return descriptor
            }
        }
    }

    private func status(publisher: FramePublisher) -> Capfleet_V1_AgentStatus {
        .with {
            $0.nodeID = identity.nodeID
            $0.devices = sources.map(\.counters)
            $0.sendQueueDepth = UInt32(publisher.queueDepth)
            $0.sendQueueCapacity = UInt32(publisher.queueCapacity)
            if let report = monitor.withLock({ $0 })?.latest { $0.pressure = report }
        }
    }

    /// Once a second (with the status report): lets each device's opt-in drop recovery act.
    private func evaluateDropRecovery() {
        for stream in sources {
            guard let event = stream.evaluateDropRecovery() else { continue }
            announce(event)
        }
    }

    /// A policy acted: logged and sent to the coordinator, which publishes and audits it.
    private func announce(_ event: Capfleet_V1_DeviceEvent) {
        logger.notice("policy acted", metadata: ["device.id": "\(event.deviceID)", "detail": "\(event.message)"])
        control.withLock { $0 }?.post(event)
    }

    /// The node's pressure level now, and its factors, for policies applied between changes.
    private var currentPressure: (level: PressureLevel, detail: String) {
        guard let report = monitor.withLock({ $0 })?.latest, let level = PressureLevel(wire: report.level) else { return (.nominal, "nominal") }
        let factors = report.factors.map { "\($0.factor) \(PressureLevel(wire: $0.level)?.description ?? "?")" }.joined(separator: ", ")
        return (level, "\(level)" + (factors.isEmpty ? "" : " (\(factors))"))
    }

    private func makePressureMonitor(publisher: FramePublisher) -> PressureMonitor {
        let disks = configuration.watchedDisks.isEmpty ? [configuration.stateDirectory] : configuration.watchedDisks
        return PressureMonitor(
            sampler: PressureSampler(root: configuration.pressureRoot, disks: disks), thresholds: configuration.pressureThresholds,
            interval: .milliseconds(configuration.pressureIntervalMilliseconds), nodeID: identity.nodeID,
            load: { [self] in
                let frames = sources.reduce(UInt64(0)) { $0 + $1.statistics.framesCaptured.load(ordering: .relaxed) }
                let drops = sources.reduce(DropTally()) { total, stream in
                    let own = stream.statistics.drops
                    return DropTally(late: total.late + own.late, outOfBuffers: total.outOfBuffers + own.outOfBuffers,
                                     discontinuity: total.discontinuity + own.discontinuity)
                }
                let (lastFrames, lastDrops) = lastLoad.withLock { last in
                    defer { last = (frames, drops) }
                    return last
                }
                // Wrapping subtraction: a device's counters restart when it is re-created.
                let interval = DropTally(late: drops.late &- lastDrops.late, outOfBuffers: drops.outOfBuffers &- lastDrops.outOfBuffers,
                                         discontinuity: drops.discontinuity &- lastDrops.discontinuity)
                let sane = interval.total < UInt64.max / 2 ? interval : DropTally()
                return AgentLoad(drops: sane, frames: frames >= lastFrames ? frames - lastFrames : 0,
                                 queueFill: publisher.queueCapacity > 0 ? Double(publisher.queueDepth) / Double(publisher.queueCapacity) : 0)
            },
            onChange: { [self] change in pressureChanged(change, publisher: publisher) })
    }

    /// A new pressure level: announced at once; at shutdown every camera stops, and starts
    /// again when the level falls back.
    private func pressureChanged(_ change: PressureMonitor.Change, publisher: FramePublisher) {
        let factors = change.report.factors.map { "\($0.factor) \(PressureLevel(wire: $0.level)?.description ?? "?")" }.joined(separator: ", ")
        logger.notice("pressure level changed", metadata: [
            "pressure.from": "\(change.previous)", "pressure.to": "\(change.current)", "pressure.factors": "\(factors)",
        ])
        control.withLock { $0 }?.post(pressureChange: change.report)
        let detail = "\(change.current)" + (factors.isEmpty ? "" : " (\(factors))")
        for stream in sources {
            if let event = stream.applyPressure(level: change.current, detail: detail) { announce(event) }
        }
        if change.current == .shutdown {
            let interruption = Interruption(reason: .pressureShutdown,
                                            message: "the host reached shutdown pressure (\(factors)); capture resumes when it eases",
                                            sinceUnixMilliseconds: change.report.unixMs)
            for stream in sources { stream.suspend(interruption) }
        } else if change.previous == .shutdown {
            for stream in sources {
                do {
                    try stream.resumeFromSuspension(because: "pressure eased to \(change.current)")
                } catch {
                    logger.error("cannot restart the device after pressure eased", metadata: [
                        "device.id": "\(stream.source.device.deviceID)", "error": "\(error)",
                    ])
                }
            }
        }
    }

    private func startStreaming(publisher: FramePublisher, clock: ClockSync) {
        for stream in sources where !stream.isStarted && !stream.isSuspended {
            do {
                try stream.start(nodeID: identity.nodeID, publisher: publisher, clock: clock) { [self] event in
                    logger.notice("device event", metadata: ["device.id": "\(event.deviceID)", "event": "\(event.kind)",
                                                            "detail": "\(event.interruption.message)\(event.message)"])
                    control.withLock { $0 }?.post(event)
                }
                logger.info("streaming", metadata: ["device.id": "\(stream.source.device.deviceID)"])
            } catch {
                logger.error("cannot start the device", metadata: ["device.id": "\(stream.source.device.deviceID)", "error": "\(error)"])
            }
        }
    }

    private func execute(_ command: Capfleet_V1_Command, clock: ClockSync) -> Capfleet_V1_CommandReply? {
        guard let stream = sources.first(where: { $0.source.device.deviceID == command.deviceID }) else {
            return .with {
                $0.commandID = command.commandID
                $0.status = .failure(.notFound, "device \(command.deviceID) is not on node \(identity.nodeID)")
            }
        }
        if case let .findFirstFrame(request)? = command.action {
            return findFirstFrame(request, commandID: command.commandID, on: stream, clock: clock)
        }
        if case let .setFrameAlignment(request)? = command.action {
            let steered = stream.setFrameAlignment(origin: request.enabled ? request.gridOriginFleetNs : nil, clock: clock)
            logger.notice("frame alignment", metadata: ["device.id": "\(command.deviceID)",
                                                        "alignment": "\(request.enabled ? (steered ? "steered" : "phase only") : "off")"])
            return .with {
                $0.commandID = command.commandID
                $0.status = steered ? .ok : .failure(.unsupported, "device \(command.deviceID) cannot adjust its frame timing; it reports its phase against the grid instead")
            }
        }
        if case let .setRecording(request)? = command.action, !request.take.isEmpty {
            return .with {
                $0.commandID = command.commandID
                $0.status = record(request, on: stream, clock: clock)
            }
        }
        var reply = Capfleet_V1_CommandReply()
        reply.commandID = command.commandID
        reply.status = apply(command, to: stream)
        reply.activeFormatIndex = UInt32(stream.source.activeFormatIndex)
        reply.activeFrameRate = stream.source.activeFrameRate
        reply.activeMinFrameRate = stream.source.activeFrameRateRange.minFramesPerSecond
        reply.zoomFactor = stream.source.zoomFactor
        reply.zoomMethod = stream.source.zoomMethod?.wire ?? .unspecified
        if let focus = stream.source.focus { reply.focus = focus.wire }
        reply.dropRecovery = stream.dropRecoveryPolicy.wire
        reply.pressurePolicy = stream.pressurePolicyWire
        reply.consent = stream.consent.wire
        return reply
    }

    /// A take begins or ends for the device: its frames from `start_fleet_ns` on go on the
    /// recording path until `stop_fleet_ns`.
    private func record(_ request: Capfleet_V1_SetRecording, on stream: CameraStream, clock: ClockSync) -> Capfleet_V1_Status {
        guard let recorder = recorder.withLock({ $0 }) else { return .failure(.unavailable, "the agent is still starting") }
        let deviceID = stream.source.device.deviceID
        if request.recording {
            guard clock.latest.estimate != nil else {
                return .failure(.unavailable, "node \(identity.nodeID)'s clock is not synchronised yet: its frames have no fleet time to place them in a take")
            }
            stream.setRecording(true)
            stream.takeTap.begin(takeID: request.take, start: request.startFleetNs, sender: recorder, deviceDrops: stream.statistics.drops)
            logger.notice("recording", metadata: ["device.id": "\(deviceID)", "take.id": "\(request.take)", "start.fleet_ns": "\(request.startFleetNs)"])
            return .ok
        }
        let now = clock.stamp(captureMonotonic: MonotonicTime.now())?.fleet
        let stop = request.stopFleetNs == 0 ? nil : request.stopFleetNs
        stream.takeTap.end(takeID: request.take, stop: stop, nowFleet: now, reason: request.consentStop ? "consent denied" : "stopped",
                           withholding: request.consentStop, deviceDrops: stream.statistics.drops)
        if stream.takeTap.takeID == nil { stream.setRecording(false) }
        if let stop, let now, stop > now {
            // A device that captures nothing after the stop instant ends by the clock instead.
            let delay = Double(stop - now) / 1e9 + 0.5
            DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [stream] in
                guard let now = clock.stamp(captureMonotonic: MonotonicTime.now())?.fleet else { return }
                stream.takeTap.endIfDue(nowFleet: now, deviceDrops: stream.statistics.drops)
                if stream.takeTap.takeID == nil { stream.setRecording(false) }
            }
        }
        logger.notice("recording stops", metadata: ["device.id": "\(deviceID)", "take.id": "\(request.take)",
                                                    "reason": "\(request.consentStop ? "consent denied" : "stopped")"])
        return .ok
    }

    /// Answers at once if it cannot be answered; otherwise when the frame is captured, or
    /// when the wait runs out.
    private func findFirstFrame(_ request: Capfleet_V1_FindFirstFrame, commandID: UInt64, on stream: CameraStream,
                                clock: ClockSync) -> Capfleet_V1_CommandReply? {
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
        guard stream.isStarted, !stream.isSuspended else {
            return reply(.failure(.unavailable, "device \(stream.source.device.deviceID) is not capturing"))
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
            let answer = timing.map { reply(.ok, $0) }
                ?? reply(.failure(.unavailable, "device \(stream.source.device.deviceID) captured no frame at or after that fleet time in time"))
            control.withLock { $0 }?.post(reply: answer)
        }
        return nil
    }

    private func apply(_ command: Capfleet_V1_Command, to stream: CameraStream) -> Capfleet_V1_Status {
        do {
            switch command.action {
            case let .setActiveFormat(request)?:
                try stream.source.setActiveFormat(index: Int(request.formatIndex))
            case let .setFrameRate(request)?:
                let slowest = request.minFramesPerSecond > 0 ? request.minFramesPerSecond : request.framesPerSecond
                try stream.source.setFrameRateRange(FrameRateRange(min: slowest, max: request.framesPerSecond))
                let pressure = currentPressure
                if let event = stream.operatorChangedRate(level: pressure.level, detail: pressure.detail) { announce(event) }
            case let .setFocus(request)?:
                try stream.source.focus(FocusRequest(wire: request))
            case let .setDropRecovery(request)?:
                stream.setDropRecovery(DropRecoveryPolicy(wire: request.policy))
            case let .setPressurePolicy(request)?:
                let pressure = currentPressure
                if let event = stream.setPressurePolicy(PressurePolicy(wire: request.policy), level: pressure.level, detail: pressure.detail) {
                    announce(event)
                }
            case let .setZoom(request)?:
                guard stream.source.zoomMethod != nil else {
                    return .failure(.unsupported, "device \(command.deviceID) cannot zoom")
                }
                try stream.source.zoom(request.cancel ? .cancel
                    : request.rampRate > 0 ? .ramp(to: request.factor, rate: request.rampRate) : .set(request.factor))
            case let .setConsent(request)?:
                guard let state = ConsentState(wire: request.state) else {
                    return .failure(.badRequest, "consent state \(request.state) is not one this agent knows; nothing changed")
                }
                // Stored before it is enforced and answered: a crash right after still knows it.
                do {
                    try consentBook.record(.init(state: state, reason: request.reason, changedUnixMilliseconds: request.changedUnixMs),
                                           for: command.deviceID)
                } catch {
                    // A denial is enforced even if it cannot be written; a grant is not.
                    if state.allowsRealFrames { return .failure(.internal, "\(error)") }
                    logger.error("cannot store consent", metadata: ["device.id": "\(command.deviceID)", "error": "\(error)"])
                }
                if stream.consent != state {
                    logger.notice("consent", metadata: ["device.id": "\(command.deviceID)", "consent": "\(state.rawValue)", "reason": "\(request.reason)"])
                }
                stream.setConsent(state)
            case let .setRecording(request)?:
                stream.setRecording(request.recording)
            case .findFirstFrame?, .setFrameAlignment?:
                // Answered in `execute` before any of this.
                return .failure(.internal, "command \(command.commandID) reached the wrong handler")
            case nil:
                return .failure(.badRequest, "command \(command.commandID) carries no action")
            }
            logger.info("command applied", metadata: ["device.id": "\(command.deviceID)", "command.id": "\(command.commandID)"])
            return .ok
        } catch {
            if error.isUnavailable { return .failure(.unavailable, error.description) }
            return .failure(.unsupported, error.description)
        }
    }
}

