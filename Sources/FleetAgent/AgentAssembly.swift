import FleetBus
import FleetCore
import FleetDaemon
import FleetHost
import FleetProtocol
import Logging
import ServiceLifecycle

/// The agent put together once it has its credentials: its sockets opened, and its
/// long-lived parts as services in one list.
///
/// The list is the shutdown order read backwards (the group stops its last part first and
/// waits for each): a part stands after everything it uses, so it stops before them.
/// What that keeps:
/// - the pressure monitor stops first: it would otherwise suspend or resume cameras that
///   are closing;
/// - each camera's thread stops its source after what was queued there, while the control
///   channel still carries their last events and the clock, sender and publisher still take
///   their frames;
/// - the recording light goes out last, once no device can turn it on again.
struct AgentAssembly: Sendable {
    let parts: [any Service]
}

/// What the agent's command handling uses, made once in `assemble` and never changed after:
/// the handlers are given these, so no part is looked up in a box that might still be empty.
struct AgentParts: Sendable {
    let clock: ClockSync
    let recorder: RecordSender
    let takeStore: AgentTakeStore
    let encoders: TakeEncoders
    let stills: StillWriter
    let monitor: PressureMonitor?
    let sensors: SensorEndpoint?

    /// The node's pressure level now, and its factors, for policies applied between changes.
    var pressure: PressureReading {
        guard let report = monitor?.latest, let level = PressureLevel(wire: report.level) else { return .nominal }
        let factors = report.factors.map { "\($0.factor) \(PressureLevel(wire: $0.level)?.description ?? "?")" }.joined(separator: ", ")
        return PressureReading(level: level, detail: "\(level)" + (factors.isEmpty ? "" : " (\(factors))"))
    }
}

extension AgentService {
    /// The sensor endpoint when the agent offers streams (sensors.md); its samples are put in
    /// fleet time by the agent's clock and leave on the control channel.
    private func openSensorEndpoint(context: ZMQContext, clock: ClockSync) throws -> SensorEndpoint? {
        guard !sensorStreams.isEmpty else { return nil }
        let endpoint = try SensorEndpoint(
            path: configuration.sensorSocketPath, streams: sensorStreams, nodeID: identity.nodeID, context: context,
            allowed: { [consentBook] deviceID in consentBook.state(of: deviceID).allowsRealFrames },
            fleetTime: { monotonic in clock.stamp(captureMonotonic: monotonic)?.fleet },
            send: { [control] batch in control.post(sensorData: batch) }, logger: logger)
        logger.info(
            "sensor endpoint open",
            metadata: ["socket": "\(endpoint.path)", "streams": "\(sensorStreams.map(\.name).joined(separator: ","))"])
        return endpoint
    }

    func assemble(credentials: AgentCredentials, takeStore: AgentTakeStore, encoders: TakeEncoders) throws -> AgentAssembly {
        // Encrypting frames must never hold up a heartbeat: frames and control on separate I/O threads.
        let context = ZMQContext.withSeparateLanes()
        let publisher = try FramePublisher(
            context: context, capacity: configuration.sendQueueCapacity,
            coordinatorKey: credentials.coordinatorKey, keys: credentials.keys, logger: logger)
        let previews = PreviewMaker(settings: configuration.preview, publisher: publisher, logger: logger)
        let clock = try ClockSync(
            context: context, coordinatorKey: credentials.coordinatorKey, keys: credentials.keys,
            nodeClock: configuration.nodeClock, logger: logger)
        if configuration.nodeClock.isSkewed {
            logger.warning(
                "this agent's clock is skewed on purpose (a test setting)",
                metadata: ["clock.offset_ns": "\(configuration.nodeClock.offset)", "clock.drift_ppm": "\(configuration.nodeClock.driftPPM)"])
        }
        let recorder = try RecordSender(
            context: context, coordinatorKey: credentials.coordinatorKey, keys: credentials.keys,
            limits: configuration.recordSpoolLimits, agentInstance: agentInstance, logger: logger)
        let stills = StillWriter(directory: configuration.recordingSettings.directory + "/stills")
        let recordings = try AgentRecordingsLink(
            context: context, coordinatorKey: credentials.coordinatorKey, keys: credentials.keys,
            store: takeStore, stills: stills, agentInstance: agentInstance,
            consentAllows: { [consentBook] deviceID in consentBook.state(of: deviceID).allowsRealFrames },
            logger: logger)
        let monitor = configuration.pressureEnabled ? makePressureMonitor(publisher: publisher, encoders: encoders) : nil
        let sensors = try openSensorEndpoint(context: context, clock: clock)
        let agentParts = AgentParts(
            clock: clock, recorder: recorder, takeStore: takeStore, encoders: encoders, stills: stills, monitor: monitor, sensors: sensors)
        let (revocations, revoke) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(1))
        let handlers = ControlHandlers(
            hello: { [self] in hello(name: credentials.nodeName, encoders: encoders) },
            status: { [self] in
                evaluateDropRecovery()
                var report = status(publisher: publisher, monitor: monitor)
                report.clock = clock.wire
                report.devices += microphones.map(\.counters)
                if let sensors {
                    let (devices, refused) = sensors.status
                    report.devices += devices
                    report.sensorMessagesRefused = refused
                }
                return report
            },
            command: { [self] command in execute(command, parts: agentParts) },
            registered: { [self] port, clockPort, recordPort in
                publisher.connect(to: configuration.ingestEndpoint(port: port))
                if recordPort != 0 {
                    recorder.connect(to: configuration.ingestEndpoint(port: recordPort))
                    recordings.connect(to: configuration.ingestEndpoint(port: recordPort))
                }
                // A coordinator too old to name a clock port has none: frames go without fleet time.
                if clockPort != 0 { clock.connect(to: configuration.ingestEndpoint(port: clockPort)) }
                startStreaming(publisher: publisher, clock: clock, previews: previews)
            },
            revoked: { [self] reason in
                // No frame may leave after this: stop capturing before anything else.
                for stream in sources { stream.stopCapturing() }
                revoke.yield(reason)
            },
            liveFrames: { [self] wanted in liveFramesWanted(wanted) })
        let channel = try ControlChannel(
            context: context, endpoint: configuration.controlEndpoint, nodeID: identity.nodeID,
            coordinatorKey: credentials.coordinatorKey, keys: credentials.keys,
            handlers: handlers, logger: logger)
        control.attach(channel)
        monitor?.start()
        sensors?.start()
        for microphone in microphones {
            let statistics = microphone.statistics
            microphone.start(
                route: MicrophoneRoute(
                    nodeID: identity.nodeID, clock: clock,
                    publish: { buffer, bytes, header in publisher.submit(buffer, byteCount: bytes, header: header, statistics: statistics) }))
        }

        // The shutdown order, read backwards: see AgentAssembly's comment.
        let parts: [(any Service)?] = [
            StoppingService("recording light") { [light] in await light.stop() },
            StoppingService("frame publisher") { publisher.stop() },
            // After the cameras (which offer previews), before the publisher (which sends them).
            StoppingService("preview maker") { await previews.stop() },
            StoppingService("record sender") { recorder.stop() },
            StoppingService("recordings link") { recordings.stop() },
            // After the cameras (which hand it frames): each part's open segment is finished.
            StoppingService("takes on this host") { await takeStore.shutdown() },
            // After the cameras, before both paths: what the encoders hold is handed on.
            StoppingService("take encoders") { await encoders.shutdown() },
            StoppingService("clock sync") { clock.stop() },
            // After the cameras, which hand it the pictures they took.
            StoppingService("still writer") { await stills.stop() },
            StoppingService("control channel") { [control] in
                // Events of the closing cameras then go nowhere instead of to a closed socket.
                control.attach(nil)
                channel.stop()
            },
            StoppingService("microphones") { [microphones] in for microphone in microphones { microphone.stop() } },
            // Before the control channel, which takes its readings.
            sensors.map { sensors in StoppingService("sensor endpoint") { sensors.stop() } },
            // Each device's thread stops its source, after what was queued there.
            StoppingService("cameras") { [sources] in
                for stream in sources { await stream.close() }
            },
            monitor.map { monitor in StoppingService("pressure monitor") { monitor.stop() } },
            // A revocation ends the agent as a signal does, every part stopped in the same
            // order, and then with AgentError.revoked.
            StoppingService(
                "revocation watch",
                run: {
                    for await reason in revocations { throw AgentError.revoked(reason) }
                }, stop: {}),
            // Stopped first: says that shutdown has begun.
            StoppingService("shutdown notice") { [logger] in
                logger.info("agent stopping")
                SystemdNotifier.stopping()
            },
        ]
        return AgentAssembly(parts: parts.compactMap { $0 })
    }
}
