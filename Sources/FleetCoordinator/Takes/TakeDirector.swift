import FleetCore
import FleetProtocol
import FleetRecording
import FleetStore
import Foundation
import Logging

/// Why a take could not be started or stopped, in words for the operator.
struct TakeRefusal: Error {
    let code: Capfleet_V1_StatusCode
    let message: String
}

/// A stop that found its take already stopped (or stopping, or failed): nothing changed.
struct TakeAlreadyStopped: Error {
    let take: TakeRecord
    let message: String
}

/// The shell around `TakeBook`: it gathers what a decision needs (the index, the agents'
/// reachability, consent), asks the book, and performs what the book says (index writes,
/// orders to agents, writers started and stopped, events), feeding outcomes back. It takes
/// no decision of its own across an `await`: two requests served at once meet in the book,
/// which reserves devices in one step. The writing itself happens on each part's own thread
/// (TakeDeviceWriter).
actor TakeDirector {
    let store: FleetDatabase
    let agents: any AgentCommands
    let writers: TakeWriters
    let events: FleetEvents
    let clock: CoordinatorClock
    let configuration: CoordinatorConfiguration
    let logger: Logger
    /// The agents' recordings links: where a part's writer sends credit and acks, and timed
    /// metadata for the parts agents write.
    let links: AgentRecordLinks
    /// The pixel format a device is streaming now, as its frames last said.
    let currentPixelFormat: @Sendable (String) -> String?
    let makeTakeID: @Sendable () -> String
    var book = TakeBook()
    /// Each take's name, for the title of the files agents write.
    var takeNames: [String: String] = [:]
    /// Each take's codec, said to its agents with every order to record, and the parts given
    /// one of their own.
    var takeEncodings: [String: TakeEncoding] = [:]
    var partEncodings: [TakeBook.Part: TakeEncoding] = [:]
    /// The sensor streams each take in progress records into its cameras' files.
    var takeSensors: [String: Set<String>] = [:]
    /// Agent-held parts whose timed metadata found no link to their node: said once each.
    var unlinkedNotes: Set<TakeBook.Part> = []
    /// What a writer about to start needs (its take and what the index holds of its part).
    var writerSetups: [TakeBook.Part: WriterSetup] = [:]
    var settledWaiters: [String: [CheckedContinuation<Void, Never>]] = [:]
    /// Writers closing on their own threads: shutdown waits for them.
    var closing: [Task<Void, Never>] = []
    /// Told of every take once it is stored (offload when stopped, recordings.md "Offload").
    var storedListeners: [@Sendable (String) async -> Void] = []

    /// `listener` hears the id of every take once all its parts are stored.
    func whenStored(_ listener: @escaping @Sendable (String) async -> Void) { storedListeners.append(listener) }
    /// One thread checksums every finished segment, so no part's writer waits for it.
    let hasher = SegmentHasher()
    /// Each take's sync and integrity, from the agents' status reports.
    nonisolated let sync: TakeSyncDesk

    struct WriterSetup: Sendable {
        let take: TakeRecord
        let device: TakeDeviceRecord
        let segmentsSoFar: Int
        let frameRate: Double
    }

    init(
        store: FleetDatabase, agents: any AgentCommands, writers: TakeWriters, events: FleetEvents, clock: CoordinatorClock,
        configuration: CoordinatorConfiguration, logger: Logger,
        links: AgentRecordLinks,
        currentPixelFormat: @escaping @Sendable (String) -> String?,
        makeTakeID: (@Sendable () -> String)? = nil, sync: TakeSyncDesk? = nil
    ) {
        self.sync = sync ?? TakeSyncDesk(store: store, events: events, clock: clock, logger: logger)
        self.store = store
        self.agents = agents
        self.writers = writers
        self.events = events
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
        self.links = links
        self.currentPixelFormat = currentPixelFormat
        // Named after the wall-clock second it starts in, read from the injected clock.
        self.makeTakeID = makeTakeID ?? { TakeDirector.takeID(at: Date(timeIntervalSince1970: Double(clock.unixMilliseconds()) / 1000)) }
    }

    static let recordableFormats: Set<String> = ["YUYV", "UYVY", "NV12", "GREY", "MJPG", "JPEG", "H264"]

    // MARK: Starting and stopping

    /// `store` nil: the coordinator's `record_store` setting; `encoding` nil: its `record_codec`.
    func start(
        deviceIDs: [String], name: String, at requested: UInt64?, fromNow: UInt64, store requestedStore: TakeBook.Store? = nil,
        encoding requestedEncoding: TakeEncoding? = nil, deviceEncodings: [String: TakeEncoding] = [:],
        requirements: TakeRequirements = TakeRequirements(), preRollMs: Int = 0, by operatorName: String
    ) async throws -> TakeRecord {
        let takeStore = requestedStore ?? configuration.recordStore
        let encoding = requestedEncoding ?? configuration.recordEncoding
        if let problem = encoding.problem { throw TakeRefusal(code: .badRequest, message: problem) }
        for (deviceID, own) in deviceEncodings.sorted(by: { $0.key < $1.key }) {
            guard deviceIDs.contains(deviceID) else {
                throw TakeRefusal(
                    code: .badRequest, message: "a codec is given for \(deviceID), which the take does not record: name it among the devices")
            }
            if let problem = own.problem { throw TakeRefusal(code: .badRequest, message: "\(deviceID): \(problem)") }
        }
        var unique: [String] = []
        for id in deviceIDs where !unique.contains(id) { unique.append(id) }
        guard !unique.isEmpty else { throw TakeRefusal(code: .badRequest, message: "name the devices to record (capfleet devices lists them)") }
        // Agent-held takes are written on each agent's disk, which checks its own reserve.
        if takeStore == .coordinator, let free = DiskSpace.availableBytes(at: configuration.takesDirectory), free < configuration.recordReserveBytes {
            throw TakeRefusal(
                code: .unavailable,
                message:
                    "the disk holding \(configuration.takesDirectory) is nearly full: \(free >> 20) MiB free, below the \(configuration.recordReserveBytes >> 20) MiB kept in reserve. Free space (capfleet recordings delete) or set recordings_dir to a larger disk"
            )
        }
        if preRollMs > Int(PreRollSettings.maximumSeconds * 1000) {
            throw TakeRefusal(
                code: .badRequest,
                message: "a pre-roll of \(preRollMs) ms is longer than the \(Int(PreRollSettings.maximumSeconds)) s an agent keeps at most")
        }
        // A camera whose pre-roll is kept encoded records its part in that encoding: the part
        // is the pre-roll's stream, from a key frame (recordings.md, "Encoded pre-roll").
        var deviceEncodings = deviceEncodings
        var encodedPreRoll = false
        if preRollMs > 0 {
            for deviceID in unique {
                guard let kept = try await store.preRoll(deviceID: deviceID)?.settings.encoding else { continue }
                if let asked = deviceEncodings[deviceID], asked != kept {
                    throw TakeRefusal(
                        code: .badRequest,
                        message:
                            "\(deviceID) keeps its pre-roll encoded as \(kept.summary), and a take reaching into it records that stream: leave out --codec-for \(deviceID) (or set its pre-roll to \(asked.summary): capfleet preroll \(deviceID) … --codec \(asked.codec.rawValue))"
                    )
                }
                deviceEncodings[deviceID] = kept
                encodedPreRoll = true
            }
        }
        let now = clock.fleetNow()
        let instant = requested ?? now + (fromNow > 0 ? fromNow : UInt64(configuration.recordLeadMilliseconds) * 1_000_000)
        // With pre-roll the take begins before its instant, in what the agents kept; at the
        // key frame before that when a camera keeps it encoded.
        let start = PreRollSettings.takeStart(instant: instant, milliseconds: preRollMs, encoded: encodedPreRoll)
        if let refusal = TakeStartWindow.standard.refusal(startFleetNs: instant, nowFleetNs: now) {
            let when = "the start \(FleetDate.text(instant)) is"
            let fleetNow = "the fleet's time is \(FleetDate.text(now)) (fleet ns \(now))"
            switch refusal {
            case let .past(by):
                throw TakeRefusal(
                    code: .badRequest,
                    message:
                        "\(when) \(TakeStartWindow.spoken(by)) in the past; \(fleetNow). Leave --at out to start now, or give a time ahead such as +2s"
                )
            case let .tooFarAhead(by):
                throw TakeRefusal(
                    code: .badRequest,
                    message:
                        "\(when) \(TakeStartWindow.spoken(by)) ahead, more than the \(TakeStartWindow.spoken(TakeStartWindow.standard.horizon)) a take may be scheduled; \(fleetNow). Check the date, or start it nearer the time"
                )
            }
        }
        var named: [DeviceRecord] = []
        for deviceID in unique { named.append(try await recordable(deviceID, encoding: deviceEncodings[deviceID] ?? encoding)) }
        // Sensor streams have no part of their own: their readings go into the cameras' files.
        // A microphone's part is FLAC whatever the take's codec (microphones.md, "In takes").
        if let microphone = named.first(where: { SourceKind(rawValue: $0.kind)?.isMicrophone == true && deviceEncodings[$0.id] != nil }) {
            throw TakeRefusal(code: .badRequest, message: "\(microphone.id) is a microphone: its sound is recorded as FLAC, it takes no codec")
        }
        let sensors = named.filter { SourceKind(rawValue: $0.kind) == .sensor }
        let parts = named.filter { SourceKind(rawValue: $0.kind) != .sensor }
        if preRollMs > 0 { try await checkPreRoll(preRollMs, of: parts) }
        guard !parts.isEmpty else {
            throw TakeRefusal(
                code: .badRequest,
                message: "a take records sensor streams into its cameras' files: name at least one camera too (capfleet devices lists them)")
        }
        if let sensor = sensors.first(where: { deviceEncodings[$0.id] != nil }) {
            throw TakeRefusal(code: .badRequest, message: "\(sensor.id) is a sensor stream: it has no codec of its own")
        }

        let id = makeTakeID()
        var take = TakeRecord(
            id: id, name: name.isEmpty ? id : name, startFleetNs: start, directory: configuration.takesDirectory + "/" + id,
            createdAt: clock.unixMilliseconds(), createdBy: operatorName)
        take.store = takeStore == .agent ? .agent : .coordinator
        take.encoding = encoding
        take.preRollMs = preRollMs
        takeNames[id] = take.name
        takeEncodings[id] = encoding
        let devices = parts.map { part in
            var device = TakeDeviceRecord(takeId: id, deviceId: part.id, nodeId: part.nodeId)
            device.ownEncoding = deviceEncodings[part.id]
            return device
        }
        for device in devices { partEncodings[TakeBook.Part(takeID: id, deviceID: device.deviceId)] = device.ownEncoding }
        // The decision, in one step: every device free, and now reserved for this take.
        let reserved: [TakeBook.Action]
        do {
            reserved = try book.reserve(takeID: id, devices: parts.map { ($0.id, $0.nodeId) }, startFleetNs: start, store: takeStore)
        } catch {
            throw TakeRefusal(code: .unavailable, message: error.description)
        }
        for (device, record) in zip(parts, devices) {
            writerSetups[TakeBook.Part(takeID: id, deviceID: device.id)] =
                WriterSetup(take: take, device: record, segmentsSoFar: 0, frameRate: device.activeFrameRate)
        }
        do {
            try await store.createTake(
                take, devices: devices, sensors: sensors.map { TakeSensorRecord(takeId: id, deviceId: $0.id, nodeId: $0.nodeId) },
                requirements: requirements,
                audit: AuditEntry(
                    at: take.createdAt, actor: operatorName, action: "recording.start", target: id, outcome: "ok",
                    detail: "\(take.name): \(unique.joined(separator: ", ")) from fleet time \(start)"
                        + (preRollMs > 0 ? " (\(preRollMs) ms of pre-roll before \(instant))" : "")))
        } catch {
            await perform(book.forget(takeID: id))
            throw TakeRefusal(code: .internal, message: "the take was not started: the recordings index could not record it: \(error)")
        }
        await sync.began(takeID: id, start: start, devices: devices.map { ($0.deviceId, $0.nodeId) }, requirements: requirements)
        // Every agent must hear of it before its start: a refusal undoes the whole take.
        let refusals = await perform(reserved)
        await perform(book.agentsAnswered(takeID: id, refusals: refusals.map { ($0.part.deviceID, $0.reason) }))
        if !refusals.isEmpty {
            await sync.forget(takeID: id)
            throw TakeRefusal(
                code: .unavailable, message: "the take did not start: " + refusals.map { "\($0.part.deviceID): \($0.reason)" }.joined(separator: "; ")
            )
        }
        if !sensors.isEmpty { takeSensors[id] = Set(sensors.map(\.id)) }
        if start < clock.fleetNow() {
            logger.warning("the take's start was already past when every agent knew of it", metadata: ["take.id": "\(id)"])
        }
        logger.notice("take started", metadata: ["take.id": "\(id)", "devices": "\(unique.joined(separator: ","))", "start.fleet_ns": "\(start)"])
        return take
    }

    /// A device that may be recorded now, or why not.
    /// A take that starts in the past needs every part's agent to keep at least that much of it
    /// (recordings.md, "Pre-roll"): a camera without is named, with how to give it one.
    private func checkPreRoll(_ milliseconds: Int, of parts: [DeviceRecord]) async throws {
        for part in parts {
            let kind = SourceKind(rawValue: part.kind)
            guard kind?.isCamera ?? true || kind?.isMicrophone == true else {
                throw TakeRefusal(
                    code: .badRequest,
                    message: "\(part.id) keeps no pre-roll: pre-roll is for cameras and microphones (take it out, or start without --pre-roll)")
            }
            let kept = try await store.preRoll(deviceID: part.id)?.milliseconds ?? 0
            guard kept >= milliseconds else {
                throw TakeRefusal(
                    code: .badRequest,
                    message:
                        "\(part.id) keeps \(kept == 0 ? "no pre-roll" : "only \(kept) ms of pre-roll"), not the \(milliseconds) ms asked for: capfleet preroll \(part.id) \(TakeStartWindow.spoken(UInt64(milliseconds) * 1_000_000).replacingOccurrences(of: " ", with: "")) first"
                )
            }
        }
    }

    private func recordable(_ deviceID: String, encoding: TakeEncoding) async throws -> DeviceRecord {
        guard let device = try await store.device(deviceID) else {
            throw TakeRefusal(code: .notFound, message: "no device \(deviceID); see capfleet devices")
        }
        guard await agents.isOnline(device.nodeId) else {
            throw TakeRefusal(
                code: .unavailable, message: "device \(deviceID)'s node \(device.nodeId) is offline: a take starts only with every device reachable")
        }
        let consent = try await store.consent(deviceID: deviceID)?.consentState ?? .notDetermined
        guard consent.allowsRealFrames else {
            throw TakeRefusal(
                code: .permissionDenied,
                message:
                    "device \(deviceID)'s consent is \(consent.rawValue): only authorized devices are recorded (capfleet consent grant \(deviceID))")
        }
        // The active format its agent last reported (a format command's answer, a registration);
        // else the last frame's, where frames reach the coordinator.
        let formats = try await store.formats(deviceID: deviceID)
        let active = formats.indices.contains(device.activeFormatPosition) ? formats[device.activeFormatPosition].pixelFormat.fourCC : nil
        if let format = active ?? currentPixelFormat(deviceID), !format.isEmpty {
            if let problem = encoding.problem(recording: PixelFormat(format), of: deviceID) {
                throw TakeRefusal(code: .badRequest, message: problem)
            }
            if !Self.recordableFormats.contains(format), !PixelFormat(format).hasWordSamples, PixelFormat(format).bayer == nil {
                throw TakeRefusal(
                    code: .unsupported,
                    message:
                        "device \(deviceID) captures \(format), which the fleet does not record (it records YUYV, UYVY, NV12, GREY, MJPEG and H.264, and Y10, Y12, Y16, P010, P016, Z16 and Bayer mosaics encoded): change its format first"
                )
            }
        }
        return device
    }

    /// Ends a take at `at` (fleet ns; nil = now). Waits up to `wait` for every device's
    /// part to be stored; the parts still uploading then go on in the background.
    func stop(takeID: String, at requested: UInt64?, wait: Duration, by operatorName: String) async throws -> TakeRecord {
        guard let take = try await store.take(id: takeID) else {
            throw TakeRefusal(code: .notFound, message: "no take \(takeID); see capfleet recordings list")
        }
        // The book decides, in one step: of two stops at once, exactly one stops the take.
        guard take.state == .recording, let (stop, actions) = book.stop(takeID: takeID, atFleetNs: requested ?? clock.fleetNow()) else {
            throw TakeAlreadyStopped(take: take, message: try await alreadyStopped(take))
        }
        do {
            try await store.setTakeStop(
                id: takeID, stopFleetNs: stop,
                audit: AuditEntry(
                    at: clock.unixMilliseconds(), actor: operatorName, action: "recording.stop", target: takeID,
                    outcome: "ok", detail: "at fleet time \(stop)"))
        } catch {
            await perform(book.indexFailed(takeID: takeID, writing: "the take's stop", error: "\(error)", nowFleetNs: clock.fleetNow()))
            throw TakeRefusal(code: .internal, message: "take \(takeID) failed: the recordings index could not record its stop: \(error)")
        }
        await sync.stopped(takeID: takeID, at: stop)
        for refusal in await perform(actions) {
            // The agent hears of it when it registers again; its frames after the stop are not kept meanwhile.
            logger.warning(
                "cannot tell the agent the take stops",
                metadata: [
                    "take.id": "\(takeID)", "device.id": "\(refusal.part.deviceID)",
                    "reason": "\(refusal.reason)",
                ])
        }
        if book.phase(of: takeID) != nil { await waitUntilSettled(takeID, atMost: wait) }
        return try await store.take(id: takeID) ?? take
    }

    /// What the operator hears when the take was stopped before: when, and by whom if the
    /// audit says.
    private func alreadyStopped(_ take: TakeRecord) async throws -> String {
        if take.state == .failed { return "take \(take.id) had already failed (\(take.error)); nothing to stop" }
        let stop = take.stopFleetNs ?? book.stopFleetNs(of: take.id)
        let when = stop.map { " at \(FleetDate.text($0)) (fleet ns \($0))" } ?? ""
        let who = try await store.lastAudit(action: "recording.stop", target: take.id).map { " by \($0.actor)" } ?? ""
        let state = take.state == .stopped ? "was already stopped" : "is already stopping"
        return "take \(take.id) \(state)\(when)\(who); nothing changed"
    }

    private func waitUntilSettled(_ takeID: String, atMost wait: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in Task { await self.addWaiter(takeID, continuation) } }
            }
            group.addTask { try? await Task.sleep(for: wait) }
            _ = await group.next()
            group.cancelAll()
            self.releaseWaiters(of: takeID)
        }
    }

    private func addWaiter(_ takeID: String, _ continuation: CheckedContinuation<Void, Never>) {
        guard book.phase(of: takeID) != nil else { return continuation.resume() }
        settledWaiters[takeID, default: []].append(continuation)
    }

    func releaseWaiters(of takeID: String) {
        for waiter in settledWaiters.removeValue(forKey: takeID) ?? [] { waiter.resume() }
    }

    /// Client-supplied metadata for a take (or one of its devices), at `at` (fleet ns; nil = now).
    /// A detection report of a device a take records now: into the part's file at its frame's
    /// fleet time (not indexed: the file's track holds them all).
    func detected(deviceID: String, json: String, at fleetNs: UInt64) {
        guard let takeID = book.take(recording: deviceID) else { return }
        let part = TakeBook.Part(takeID: takeID, deviceID: deviceID)
        guard book.isOpen(part), book.covers(takeID, fleetNs: fleetNs) else { return }
        noteInFile(part, json: json, at: fleetNs, track: .detections)
    }

    /// A sensor stream's readings (sensors.md, "In takes"): those within each take recording
    /// the stream go, as one entry at the first one's time, into the sensor track of every
    /// camera part the take has open. Readings without fleet time belong to no take.
    func sensed(_ batch: Capfleet_V1_SensorData) {
        for (takeID, sensors) in takeSensors where sensors.contains(batch.deviceID) {
            guard book.phase(of: takeID) != nil else {
                takeSensors.removeValue(forKey: takeID)
                continue
            }
            let readings = batch.readings.filter { $0.fleetTimeNs != 0 && book.covers(takeID, fleetNs: $0.fleetTimeNs) }
            guard let first = readings.first else { continue }
            let json = Self.sensorEntry(batch, readings: readings)
            for part in book.openParts(of: takeID) { noteInFile(part, json: json, at: first.fleetTimeNs, track: .sensors) }
        }
    }

    /// The JSON object a sensor track holds for a batch (recordings.md, "Timed metadata").
    static func sensorEntry(_ batch: Capfleet_V1_SensorData, readings: [Capfleet_V1_SensorReading]) -> String {
        json(any: [
            "kind": "sensor", "device_id": batch.deviceID, "node_id": batch.nodeID, "stream": batch.stream, "channels": batch.channels,
            "readings": readings.map { reading -> [String: Any] in
                var entry: [String: Any] = ["fleet_ns": reading.fleetTimeNs, "monotonic_ns": reading.monotonicNs, "values": reading.values]
                if !reading.text.isEmpty { entry["text"] = reading.text }
                return entry
            },
        ])
    }

    func note(takeID: String, deviceID: String?, fields: [String: Any], at: UInt64?) async throws -> TakeRecord {
        guard let take = try await store.take(id: takeID) else {
            throw TakeRefusal(code: .notFound, message: "no take \(takeID); see capfleet recordings list")
        }
        let parts = book.openParts(of: takeID).filter { deviceID == nil || $0.deviceID == deviceID }
        guard take.state == .recording, !parts.isEmpty else {
            throw TakeRefusal(
                code: .unavailable, message: deviceID.map { "take \(takeID) is not recording \($0) now" } ?? "take \(takeID) is not recording now")
        }
        let fleetNs = at ?? clock.fleetNow()
        var fields = fields
        fields["fleet_ns"] = fleetNs
        let json = Self.json(any: fields)
        for part in parts { noteInFile(part, json: json, at: fleetNs) }
        try await store.recordTakeEvent(
            TakeEventRecord(
                takeId: takeID, deviceId: deviceID ?? "", fleetNs: fleetNs,
                kind: fields["kind"] as? String ?? "note", detail: json))
        return take
    }

    // MARK: What happens to the fleet meanwhile

    /// At the coordinator's start: parts left in progress go on, each in a new segment.
    func resumeUnfinished() async throws {
        for (take, devices, segments) in try await store.unfinishedTakes() {
            for device in devices {
                let frameRate = try await store.device(device.deviceId)?.activeFrameRate ?? device.frameRate
                writerSetups[TakeBook.Part(takeID: take.id, deviceID: device.deviceId)] = WriterSetup(
                    take: take, device: device, segmentsSoFar: segments.filter { $0.deviceId == device.deviceId }.map(\.number).max() ?? 0,
                    frameRate: frameRate)
            }
            takeNames[take.id] = take.name
            takeEncodings[take.id] = take.encoding
            let sensors = try await store.takeSensors(takeIDs: [take.id])
            if !sensors.isEmpty { takeSensors[take.id] = Set(sensors.map(\.deviceId)) }
            for device in devices { partEncodings[TakeBook.Part(takeID: take.id, deviceID: device.deviceId)] = device.ownEncoding }
            if let kept = try await store.takeSync(takeID: take.id), kept.report == nil {
                await sync.began(
                    takeID: take.id, start: take.startFleetNs, devices: devices.map { ($0.deviceId, $0.nodeId) }, requirements: kept.requirements,
                    stop: take.stopFleetNs, resumedAt: clock.fleetNow())
            }
            await perform(
                book.resume(
                    takeID: take.id, startFleetNs: take.startFleetNs, stopFleetNs: take.stopFleetNs,
                    devices: devices.map { ($0.deviceId, $0.nodeId) }, store: take.store == .agent ? .agent : .coordinator))
            logger.notice("take goes on after a restart", metadata: ["take.id": "\(take.id)", "devices": "\(devices.count)"])
        }
    }

    /// Follows the fleet's node events until the feed ends. A registration is served beside
    /// the events after it, in a task of its own: telling a restarted agent its parts waits
    /// for its clock (seconds, in which a device's events still belong in its takes), and a
    /// command in flight must not hold up the coordinator's shutdown.
    func follow(nodeEvents: AsyncStream<NodeEvent>) async {
        for await event in nodeEvents {
            switch event {
            case let .registered(nodeID, _): Task { await self.nodeRegistered(nodeID) }
            case let .offline(nodeID): await nodeOffline(nodeID)
            case let .device(deviceID, kind, detail): await deviceEvent(deviceID, kind: kind, detail: detail)
            case .detection, .sensorData: continue
            case let .status(samples, at): await sync.observe(samples, at: at)
            }
        }
    }

    /// A node registered: it hears again of the takes its devices are in (it may have
    /// restarted and forgotten them), and of their stops.
    func nodeRegistered(_ nodeID: String) async {
        for (part, orders) in book.registered(nodeID) {
            var answer = await agents.command(
                .setRecording(recordingOrder(part, orders[0])), deviceID: part.deviceID, nodeID: nodeID,
                timeout: .seconds(3))
            // A restarted agent refuses until its clock has an estimate (a second or two).
            for _ in 0..<30 where !answer.status.isOK && book.isOpen(part) {
                try? await Task.sleep(for: .seconds(1))
                answer = await agents.command(
                    .setRecording(recordingOrder(part, orders[0])), deviceID: part.deviceID, nodeID: nodeID,
                    timeout: .seconds(3))
            }
            guard answer.status.isOK else {
                logger.error(
                    "the agent does not take up its part of the take again",
                    metadata: [
                        "take.id": "\(part.takeID)", "device.id": "\(part.deviceID)", "reason": "\(answer.status.reason)",
                    ])
                continue
            }
            // An agent that records the part itself has taken it up again: it is recording.
            if book.store(of: part.takeID) == .agent {
                await perform(book.report(.flowing, from: part, nowFleetNs: clock.fleetNow()))
            }
            for order in orders.dropFirst() {
                let reply = await agents.command(
                    .setRecording(recordingOrder(part, order)), deviceID: part.deviceID, nodeID: nodeID,
                    timeout: .seconds(3))
                if !reply.status.isOK {
                    logger.warning(
                        "cannot tell the agent the take stops",
                        metadata: [
                            "take.id": "\(part.takeID)", "device.id": "\(part.deviceID)",
                            "reason": "\(reply.status.reason)",
                        ])
                }
            }
        }
    }

    /// A node went silent: each of its parts is interrupted until its frames flow again.
    func nodeOffline(_ nodeID: String) async {
        await perform(book.nodeWentSilent(nodeID, nowFleetNs: clock.fleetNow()))
    }

    /// Consent was denied, revoked or restricted: the device's part of every take stops now,
    /// and what its agent has not sent yet stays on its host.
    func consentWithdrawn(deviceID: String, state: String, reason: String) async {
        await perform(book.consentWithdrawn(deviceID: deviceID, state: state, reason: reason, nowFleetNs: clock.fleetNow()))
    }

    /// An operator changed a device (format, frame rate, zoom, focus, policy): noted in every
    /// take recording it.
    func deviceChanged(_ deviceID: String, fields: [String: Any]) async {
        let now = clock.fleetNow()
        guard let takeID = book.take(recording: deviceID) else { return }
        var fields = fields
        fields["fleet_ns"] = now
        let json = Self.json(any: fields)
        noteInFile(TakeBook.Part(takeID: takeID, deviceID: deviceID), json: json, at: now)
        await indexNote(TakeEventRecord(takeId: takeID, deviceId: deviceID, fleetNs: now, kind: fields["kind"] as? String ?? "change", detail: json))
    }

    /// A device's own event (interrupted: unplugged, in use, pressure; resumed): noted in its takes.
    func deviceEvent(_ deviceID: String, kind: String, detail: String) async {
        await perform(book.noteDevice(deviceID, kind: kind, nowFleetNs: clock.fleetNow(), fields: ["detail": detail, "source": "device"]))
    }

    /// A part's writer reported from its thread.
    func report(_ event: TakeDeviceWriter.Event, from part: TakeBook.Part) async {
        let report: TakeBook.PartReport =
            switch event {
            case let .agentChanged(instance, restarted): .agentChanged(instance: instance, restarted: restarted)
            case let .rebased(offset): .rebased(offset: offset)
            case .flowing: .flowing
            case let .ended(reason, withheld): .ended(reason: reason, withheldFrames: withheld)
            case let .failed(message): .failed(message)
            }
        await perform(book.report(report, from: part, nowFleetNs: clock.fleetNow()))
    }

    /// Stops every part's thread (each finishes its open segment). Parts stay in progress in
    /// the index: the next start goes on with them.
    func shutdown() async {
        for writer in writers.all() { await writer.shutdown() }
        for task in closing { await task.value }
        closing.removeAll()
        await hasher.stop()
    }
}
