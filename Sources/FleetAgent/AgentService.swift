import FleetBus
import FleetCapture
import FleetCore
import FleetDaemon
import FleetHost
import FleetProtocol
import FleetSystem
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// One agent: discovers its cameras, registers with the coordinator, streams frames and
/// reports status until it is told to shut down.
public final class AgentService: Service, Sendable {
    let configuration: AgentConfiguration
    let identity: NodeIdentity
    /// This agent process, new at every start: HELLO and the recording path name it, so the
    /// coordinator knows a restart (whose commands in flight are lost) from a reconnection.
    let agentInstance = UUID().uuidString.lowercased()
    let sources: [CameraStream]
    /// The sensor streams it offers (sensors.md): devices of their own kind, in HELLO after the cameras.
    let sensorStreams: [SensorEndpoint.Stream]
    /// Its microphones (microphones.md): devices of their own kind, in HELLO after the sensor streams.
    let microphones: [Microphone]
    let consentBook: ConsentBook
    let light: RecordingLight
    let logger: Logger
    /// The control channel once run() has opened it: device events and late replies go there.
    let control: ControlMailbox
    let wallClock: WallClock
    /// Frames and drops of all devices at the last pressure sample, for the drop rate.
    private let lastLoad = Mutex<(frames: UInt64, drops: DropTally, detection: DetectionTally)>((0, DropTally(), DetectionTally()))

    /// `wallClock`: what the agent's reports and take files are stamped with (the one place
    /// it is read; a test chooses the time).
    public init(configuration: AgentConfiguration, logger: Logger, wallClock: WallClock = .system) throws {
        self.configuration = configuration
        self.wallClock = wallClock
        let identity = try NodeIdentity.loadOrCreate(stateDirectory: configuration.stateDirectory)
        self.identity = identity
        var logger = logger
        logger[metadataKey: "node.id"] = "\(identity.nodeID)"
        self.logger = logger
        let book = try ConsentBook(stateDirectory: configuration.stateDirectory)
        if let problem = configuration.sensorStreams.lazy.compactMap(SensorStreamName.problem).first {
            throw AgentError.sensorStreamUnusable(problem)
        }
        sensorStreams = SensorEndpoint.streams(named: configuration.sensorStreams, nodeID: identity.nodeID)
        consentBook = book
        let light = RecordingLight(command: configuration.realFramesCommand, nodeID: identity.nodeID, logger: logger)
        self.light = light
        // Each microphone, like each camera, starts with the consent this agent last stored.
        microphones = try MicrophoneInventory.sources(for: configuration, nodeID: identity.nodeID, logger: logger).map { source in
            Microphone(
                source: source, consent: book.state(of: source.descriptor.deviceID), logger: logger,
                onRealSamples: { deviceID, flowing in light.set(deviceID: deviceID, on: flowing) })
        }
        let control = ControlMailbox()
        self.control = control
        let notify: @Sendable (Capfleet_V1_DeviceEvent) -> Void = { [logger] event in
            logger.notice(
                event.kind == .policyActed ? "policy acted" : "device event",
                metadata: [
                    "device.id": "\(event.deviceID)", "event": "\(event.kind)", "detail": "\(event.interruption.message)\(event.message)",
                ])
            control.post(event)
        }
        // Each device starts with the consent this agent last stored: nothing unlocks it but the coordinator.
        sources = try CameraInventory.sources(for: configuration, nodeID: identity.nodeID, logger: logger, wallClock: wallClock).map { source in
            CameraStream(
                source: source, consent: book.state(of: source.device.deviceID), logger: logger, wallClock: wallClock.unixMilliseconds,
                onRealFrames: { deviceID, flowing in light.set(deviceID: deviceID, on: flowing) }, notify: notify)
        }
        // Detections leave the host only while the camera's consent is granted (checked again
        // when each is sent: consent may have gone since its frame was captured).
        for stream in sources {
            stream.detection.deliver { [weak stream] report in
                guard let stream, stream.consent.allowsRealFrames else { return }
                control.post(detection: report)
            }
        }
    }

    public var nodeID: String { identity.nodeID }

    /// Runs the agent's parts (AgentAssembly lists them) as a group of their own, which
    /// follows the graceful shutdown of the group this service runs in and stops the parts in
    /// reverse of their list.
    public func run() async throws {
        let credentials = try await credentials()
        // Takes written here: what an earlier run left is repaired (disk I/O, on a thread of its
        // own) before any part is taken up again.
        let takeStore = AgentTakeStore(settings: configuration.recordingSettings, logger: logger, clock: wallClock.unixMilliseconds)
        for note in await OwnedThread.run("cf-recovery", { takeStore.recoverParts() }) {
            logger.notice("recordings on this host", metadata: ["recovery": "\(note)"])
        }
        // Which encoders this host has (hardware ones tried with a frame): before HELLO says them.
        let catalog = await OwnedThread.run("cf-encoders") { [configuration, logger] in
            TakeEncoders.discover(useHardware: configuration.hardwareEncoders, logger: logger)
        }
        let encoders = TakeEncoders(
            catalog: catalog,
            settings: TakeEncodingPath.Settings(
                threads: configuration.encoderThreads,
                preset: configuration.encoderPreset),
            logger: logger)
        let assembly = try assemble(credentials: credentials, takeStore: takeStore, encoders: encoders)
        logger.info(
            "agent started",
            metadata: [
                "coordinator": "\(configuration.controlEndpoint)", "devices": "\(sources.count)",
                "key": "\(credentials.keys.publicKey.fingerprint)…",
            ])
        // Enrolled, cameras open, sockets up: a `Type=notify` unit counts as started from here
        // (registering waits for the coordinator, which may come later).
        SystemdNotifier.ready(status: "\(sources.count) camera(s), coordinator \(configuration.controlEndpoint)")
        do {
            try await ServiceGroup.daemon(assembly.parts, logger: logger).run()
        } catch AgentError.revoked(let reason) {
            logger.critical("this node was revoked", metadata: ["reason": "\(reason)"])
            throw AgentError.revoked(reason)
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
        let credentials = try await Enrollment.enroll(
            token: token, endpoint: configuration.controlEndpoint, nodeID: identity.nodeID,
            requestedName: configuration.nodeName ?? "", hostname: hostname,
            softwareVersion: WireDefaults.release,
            stateDirectory: configuration.stateDirectory, logger: logger)
        logger.notice("enrolled", metadata: ["node.name": "\(credentials.nodeName)", "key": "\(credentials.keys.publicKey.fingerprint)…"])
        if let asked = configuration.nodeName, asked != credentials.nodeName {
            logger.warning("the token names this node, not --name", metadata: ["node.name": "\(credentials.nodeName)", "asked": "\(asked)"])
        }
        return credentials
    }

    /// gethostname(2), not Foundation's hostName, which may wait on a DNS lookup.
    private var hostname: String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "unknown-host" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func hello(name enrolledName: String, encoders: TakeEncoders) -> Capfleet_V1_Hello {
        .with {
            $0.protocolVersion = WireDefaults.protocolMajor
            $0.protocolMinor = WireDefaults.protocolMinor
            $0.nodeID = identity.nodeID
            $0.nodeName = configuration.nodeName ?? (enrolledName.isEmpty ? hostname : enrolledName)
            $0.hostname = hostname
            $0.softwareVersion = WireDefaults.release
            $0.bootMonotonicNs = MonotonicTime.now()
            $0.agentInstance = agentInstance
            $0.devices =
                sources.map { stream in
                    let source = stream.source
                    var descriptor = source.device.wire
                    descriptor.activeFormatIndex = UInt32(source.activeFormatIndex)
                    descriptor.activeFrameRate = source.activeFrameRate
                    descriptor.activeMinFrameRate = source.activeFrameRateRange.minFramesPerSecond
                    return descriptor
                } + sensorStreams.map(\.descriptor) + microphones.map(\.descriptor)
            $0.encoders = encoders.catalog.encoders.map { choice in
                .with {
                    $0.codec = choice.codec.wire
                    $0.name = choice.name
                    $0.hardware = choice.isHardware
                    $0.device = choice.device ?? ""
                }
            }
        }
    }

    func status(publisher: FramePublisher, monitor: PressureMonitor?) -> Capfleet_V1_AgentStatus {
        .with {
            $0.nodeID = identity.nodeID
            $0.devices = sources.map(\.counters)
            $0.sendQueueDepth = UInt32(publisher.queueDepth)
            $0.sendQueueCapacity = UInt32(publisher.queueCapacity)
            if let report = monitor?.latest { $0.pressure = report }
        }
    }

    /// Once a second (with the status report): lets each device's opt-in drop recovery act,
    /// on the device's own thread.
    func evaluateDropRecovery() {
        for stream in sources { stream.endDropInterval() }
    }

    func makePressureMonitor(publisher: FramePublisher, encoders: TakeEncoders) -> PressureMonitor {
        let disks = configuration.watchedDisks.isEmpty ? [configuration.stateDirectory] : configuration.watchedDisks
        return PressureMonitor(
            sampler: PressureSampler(root: configuration.pressureRoot, disks: disks), thresholds: configuration.pressureThresholds,
            interval: .milliseconds(configuration.pressureIntervalMilliseconds), nodeID: identity.nodeID,
            load: { [self] in
                let frames = sources.reduce(UInt64(0)) { $0 + $1.statistics.framesCaptured.load(ordering: .relaxed) }
                let drops = sources.reduce(DropTally()) { total, stream in total.adding(stream.statistics.drops) }
                let detection = sources.reduce(DetectionTally()) { total, stream in
                    DetectionTally(examined: total.examined + stream.detection.examined, skipped: total.skipped + stream.detection.skipped)
                }
                let (lastFrames, lastDrops, lastDetection) = lastLoad.withLock { last in
                    defer { last = (frames, drops, detection) }
                    return last
                }
                // Wrapping subtraction: a device's counters restart when it is re-created.
                let interval = DropTally(
                    late: drops.late &- lastDrops.late, outOfBuffers: drops.outOfBuffers &- lastDrops.outOfBuffers,
                    discontinuity: drops.discontinuity &- lastDrops.discontinuity,
                    encoderLate: drops.encoderLate &- lastDrops.encoderLate)
                let sane = interval.total < UInt64.max / 2 ? interval : DropTally()
                // The fuller of the send queue and the take encoders' queues: an encoder falling
                // behind strains the host as a slow network does.
                let sendFill = publisher.queueCapacity > 0 ? Double(publisher.queueDepth) / Double(publisher.queueCapacity) : 0
                let encoderFill = encoders.queueFill
                return AgentLoad(
                    drops: sane, frames: frames >= lastFrames ? frames - lastFrames : 0, queueFill: max(sendFill, encoderFill),
                    detection: detection.since(lastDetection))
            },
            onChange: { [self] change in pressureChanged(change, publisher: publisher) }, wallClock: wallClock)
    }

    /// A new pressure level: announced at once; at shutdown every camera stops, and starts
    /// again when the level falls back.
    private func pressureChanged(_ change: PressureMonitor.Change, publisher: FramePublisher) {
        let factors = change.report.factors.map { "\($0.factor) \(PressureLevel(wire: $0.level)?.description ?? "?")" }.joined(separator: ", ")
        logger.notice(
            "pressure level changed",
            metadata: [
                "pressure.from": "\(change.previous)", "pressure.to": "\(change.current)", "pressure.factors": "\(factors)",
            ])
        control.post(pressureChange: change.report)
        let reading = PressureReading(level: change.current, detail: "\(change.current)" + (factors.isEmpty ? "" : " (\(factors))"))
        for stream in sources { stream.pressureChanged(reading) }
        for microphone in microphones { microphone.pressureChanged(to: change.current) }
        if change.current == .shutdown {
            let interruption = Interruption(
                reason: .pressureShutdown,
                message: "the host reached shutdown pressure (\(factors)); capture resumes when it eases",
                sinceUnixMilliseconds: change.report.unixMs)
            for stream in sources { stream.suspend(interruption) }
        } else if change.previous == .shutdown {
            // A source that cannot start again says so in the log; the next registration retries.
            for stream in sources { stream.liftSuspension(because: "pressure eased to \(change.current)") }
        }
    }

    /// The coordinator's set of devices whose full-rate frames it wants: each listed device
    /// sends for the lease, every other one stops now.
    func liveFramesWanted(_ wanted: Capfleet_V1_LiveFrames) {
        let listed = Set(wanted.deviceIds), encoded = Set(wanted.encodedDeviceIds)
        let lease = UInt64(wanted.leaseMs == 0 ? 3000 : wanted.leaseMs) * 1_000_000
        let now = MonotonicTime.now()
        for stream in sources {
            let wasEncoded = stream.encodedFlow.isOpen(at: now), isEncoded = encoded.contains(stream.deviceID)
            stream.encodedFlow.wanted(isEncoded, leaseNanoseconds: lease, now: now)
            if wasEncoded != isEncoded {
                logger.info(
                    isEncoded ? "encoded packets wanted: sending those of the take encoding it" : "encoded packets no longer wanted: stopped",
                    metadata: ["device.id": "\(stream.deviceID)"])
            }
            let wasOpen = stream.liveFlow.isOpen(at: now)
            let isWanted = listed.contains(stream.deviceID)
            stream.liveFlow.wanted(isWanted, leaseNanoseconds: lease, now: now)
            if wasOpen != isWanted {
                logger.info(
                    isWanted ? "full-rate frames wanted: sending" : "full-rate frames no longer wanted: stopped",
                    metadata: ["device.id": "\(stream.deviceID)"])
            }
        }
        for microphone in microphones {
            let wasOpen = microphone.liveFlow.isOpen(at: now), isWanted = listed.contains(microphone.deviceID)
            microphone.liveFlow.wanted(isWanted, leaseNanoseconds: lease, now: now)
            if wasOpen != isWanted {
                logger.info(
                    isWanted ? "sound wanted: sending" : "sound no longer wanted: stopped", metadata: ["device.id": "\(microphone.deviceID)"])
            }
        }
    }

    /// At every WELCOME: each device captures (unless the agent holds it suspended); one
    /// already capturing goes on. Its source starts on the device's own thread.
    func startStreaming(publisher: FramePublisher, clock: ClockSync, previews: PreviewMaker) {
        for stream in sources {
            // A flash overlay lights on the fleet's whole seconds, as the synthetic microphone clicks.
            (stream.source as? SyntheticCamera)?.useFleetClock { clock.stamp(captureMonotonic: $0)?.fleet }
            let statistics = stream.statistics
            // Packets a viewer of the encoded stream misses are its loss, not the camera's drops.
            let encodedStatistics = DeviceStatistics(deviceID: stream.deviceID, outOfBuffers: { 0 })
            stream.startCapturing(
                CaptureRoute(
                    nodeID: identity.nodeID, clock: clock,
                    publish: { frame, header in
                        publisher.submit(frame, header: header, statistics: statistics)
                    },
                    publishEncoded: { packet, header in
                        publisher.submit(packet, header: header, statistics: encodedStatistics)
                    }, previews: previews))
        }
    }
}
