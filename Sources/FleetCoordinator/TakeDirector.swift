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

/// Starts and stops takes, and keeps every device's part going through what the fleet does
/// meanwhile: agents that register again (they hear of their takes again), nodes that go
/// silent (an interruption, recorded), consent withdrawn (that part stops at once) and the
/// coordinator's own restart (parts in progress go on). The writing itself happens on each
/// part's own thread (TakeDeviceWriter).
actor TakeDirector {
    private let store: FleetDatabase
    private let control: ControlHandler
    private let writers: TakeWriters
    private let endpoint: RecordEndpoint
    private let events: FleetEvents
    private let fleetTime: FleetTimeSource
    private let configuration: CoordinatorConfiguration
    private let logger: Logger
    private let ingest: FrameIngest
    /// Parts of a take that have not ended, by take: when the last ends, the take has stopped.
    private var openParts: [String: Set<String>] = [:]
    private var interrupted: Set<TakeWriters.Key> = []
    private var partsEnded: [String: [CheckedContinuation<Void, Never>]] = [:]
    /// One thread checksums every finished segment, so no part's writer waits for it.
    private let hasher = SegmentHasher()

    init(store: FleetDatabase, control: ControlHandler, writers: TakeWriters, endpoint: RecordEndpoint, events: FleetEvents,
         fleetTime: FleetTimeSource, ingest: FrameIngest, configuration: CoordinatorConfiguration, logger: Logger) {
        self.store = store
        self.control = control
        self.writers = writers
        self.endpoint = endpoint
        self.events = events
        self.fleetTime = fleetTime
        self.ingest = ingest
        self.configuration = configuration
        self.logger = logger
    }

    static let recordableFormats: Set<String> = ["YUYV", "UYVY", "NV12", "GREY", "MJPG", "JPEG", "H264"]

    // MARK: Starting and stopping

    func start(deviceIDs: [String], name: String, at requested: UInt64?, fromNow: UInt64, by operatorName: String) async throws -> TakeRecord {
        let unique = Array(NSOrderedSet(array: deviceIDs)) as? [String] ?? deviceIDs
        guard !unique.isEmpty else { throw TakeRefusal(code: .badRequest, message: "name the devices to record (capfleet devices lists them)") }
        if let free = DiskSpace.availableBytes(at: configuration.takesDirectory), free < configuration.recordReserveBytes {
            throw TakeRefusal(code: .unavailable, message: "the disk holding \(configuration.takesDirectory) is nearly full: \(free >> 20) MiB free, below the \(configuration.recordReserveBytes >> 20) MiB kept in reserve. Free space (capfleet recordings delete) or set recordings_dir to a larger disk")
        }
        let now = fleetTime.now()
        let start = requested ?? now + (fromNow > 0 ? fromNow : UInt64(configuration.recordLeadMilliseconds) * 1_000_000)
        var parts: [(device: DeviceRecord, frameRate: Double)] = []
        for deviceID in unique {
            guard let device = try await store.device(deviceID) else {
                throw TakeRefusal(code: .notFound, message: "no device \(deviceID); see capfleet devices")
            }
            guard await control.isOnline(device.nodeId) else {
                throw TakeRefusal(code: .unavailable, message: "device \(deviceID)'s node \(device.nodeId) is offline: a take starts only with every device reachable")
            }
            let consent = try await store.consent(deviceID: deviceID)?.consentState ?? .notDetermined
            guard consent.allowsRealFrames else {
                throw TakeRefusal(code: .permissionDenied, message: "device \(deviceID)'s consent is \(consent.rawValue): only authorized devices are recorded (capfleet consent grant \(deviceID))")
            }
            if let format = ingest.state(of: deviceID)?.layout.pixelFormat, !format.isEmpty, !Self.recordableFormats.contains(format) {
                throw TakeRefusal(code: .unsupported, message: "device \(deviceID) captures \(format), which the fleet does not record (it records YUYV, UYVY, NV12, GREY, MJPEG and H.264): change its format first")
            }
            if let busy = writers.of(deviceID: deviceID).first {
                throw TakeRefusal(code: .unavailable, message: "device \(deviceID) is being recorded in take \(busy.takeID); stop that first")
            }
            parts.append((device, device.activeFrameRate))
        }
        let id = Self.takeID(at: Date())
        let take = TakeRecord(id: id, name: name.isEmpty ? id : name, startFleetNs: start, directory: configuration.takesDirectory + "/" + id,
                              createdAt: Date().unixMilliseconds, createdBy: operatorName)
        try await store.createTake(take, devices: parts.map { TakeDeviceRecord(takeId: id, deviceId: $0.device.id, nodeId: $0.device.nodeId) },
                                   audit: AuditEntry(at: take.createdAt, actor: operatorName, action: "recording.start", target: id, outcome: "ok",
                                                     detail: "\(take.name): \(unique.joined(separator: ", ")) from fleet time \(start)"))
        for part in parts {
            startWriter(take: take, device: TakeDeviceRecord(takeId: id, deviceId: part.device.id, nodeId: part.device.nodeId),
                        segmentsSoFar: 0, frameRate: part.frameRate)
        }
        // Every agent must hear of it before its start: a refusal undoes the whole take.
        var refusals: [String] = []
        for part in parts {
            let answer = await control.command(.setRecording(.with {
                $0.recording = true
                $0.take = id
                $0.startFleetNs = start
            }), deviceID: part.device.id, nodeID: part.device.nodeId)
            if !answer.status.isOK { refusals.append("\(part.device.id): \(answer.status.reason)") }
        }
        if !refusals.isEmpty {
            let reason = refusals.joined(separator: "; ")
            await abandon(take, parts: parts.map(\.device), reason: reason, by: operatorName)
            throw TakeRefusal(code: .unavailable, message: "the take did not start: \(reason)")
        }
        if start < fleetTime.now() {
            logger.warning("the take's start was already past when every agent knew of it", metadata: ["take.id": "\(id)"])
        }
        events.emit(.recording, message: "take \(id) (\(take.name)) of \(unique.joined(separator: ", ")) starts at fleet time \(start)")
        logger.notice("take started", metadata: ["take.id": "\(id)", "devices": "\(unique.joined(separator: ","))", "start.fleet_ns": "\(start)"])
        return take
    }

    /// Ends a take at `at` (fleet ns; nil = now). Waits up to `wait` for every device's
    /// part to be stored; the parts still uploading then go on in the background.
    func stop(takeID: String, at requested: UInt64?, wait: Duration, by operatorName: String) async throws -> TakeRecord {
        guard let take = try await store.take(id: takeID) else {
            throw TakeRefusal(code: .notFound, message: "no take \(takeID); see capfleet recordings list")
        }
        guard take.state == .recording else { return take }
        let stop = max(requested ?? fleetTime.now(), take.startFleetNs)
        if let already = take.stopFleetNs, already <= stop { return take }
        try await store.setTakeStop(id: takeID, stopFleetNs: stop,
                                    audit: AuditEntry(at: Date().unixMilliseconds, actor: operatorName, action: "recording.stop", target: takeID,
                                                      outcome: "ok", detail: "at fleet time \(stop)"))
        for writer in writers.of(takeID: takeID) {
            writer.post(.stop(at: stop))
            let answer = await control.command(.setRecording(.with {
                $0.recording = false
                $0.take = takeID
                $0.stopFleetNs = stop
            }), deviceID: writer.deviceID, nodeID: writer.nodeID)
            if !answer.status.isOK {
                // The agent hears of it when it registers again; its frames after the stop are not kept meanwhile.
                logger.warning("cannot tell the agent the take stops", metadata: ["take.id": "\(takeID)", "device.id": "\(writer.deviceID)",
                                                                                   "reason": "\(answer.status.reason)"])
            }
        }
        events.emit(.recording, message: "take \(takeID) stops at fleet time \(stop)")
        // Wait until every part is stored, or until `wait` runs out.
        if openParts[takeID] != nil {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.waitForParts(of: takeID) }
                group.addTask { try? await Task.sleep(for: wait) }
                _ = await group.next()
                group.cancelAll()
                self.releaseWaiters(of: takeID)
            }
        }
        return try await store.take(id: takeID) ?? take
    }

    private func waitForParts(of takeID: String) async {
        guard openParts[takeID] != nil else { return }
        await withCheckedContinuation { continuation in partsEnded[takeID, default: []].append(continuation) }
    }

    private func releaseWaiters(of takeID: String) {
        for waiter in partsEnded.removeValue(forKey: takeID) ?? [] { waiter.resume() }
    }

    /// A take some agent refused: it never started. Its parts are stopped and it is marked failed.
    private func abandon(_ take: TakeRecord, parts: [DeviceRecord], reason: String, by operatorName: String) async {
        for device in parts {
            if let writer = writers.remove(takeID: take.id, deviceID: device.id) { await writer.shutdown() }
            _ = await control.command(.setRecording(.with {
                $0.recording = false
                $0.take = take.id
                $0.consentStop = true
            }), deviceID: device.id, nodeID: device.nodeId)
            try? await store.modifyTakeDevice(takeID: take.id, deviceID: device.id) { $0.state = .failed; $0.endReason = "not started" }
        }
        openParts[take.id] = nil
        try? await store.endTake(id: take.id, state: .failed, stopFleetNs: take.startFleetNs, at: Date().unixMilliseconds, error: reason,
                                 audit: AuditEntry(at: Date().unixMilliseconds, actor: operatorName, action: "recording.start", target: take.id,
                                                   outcome: "failed", detail: reason))
    }

    // MARK: What happens to the fleet meanwhile

    /// At the coordinator's start: parts left in progress go on, each in a new segment.
    func resumeUnfinished() async throws {
        for (take, devices, segments) in try await store.unfinishedTakes() {
            for device in devices {
                let frameRate = try await store.device(device.deviceId)?.activeFrameRate ?? device.frameRate
                startWriter(take: take, device: device, segmentsSoFar: segments.filter { $0.deviceId == device.deviceId }.map(\.number).max() ?? 0,
                            frameRate: frameRate)
            }
            logger.notice("take goes on after a restart", metadata: ["take.id": "\(take.id)", "devices": "\(devices.count)"])
        }
    }

    /// A node registered: it hears again of the takes its devices are in (it may have
    /// restarted and forgotten them), and of their stops.
    func nodeRegistered(_ nodeID: String) async {
        for writer in writers.of(nodeID: nodeID) {
            guard let take = try? await store.take(id: writer.takeID) else { continue }
            var request = Capfleet_V1_SetRecording()
            request.recording = true
            request.take = take.id
            request.startFleetNs = take.startFleetNs
            // A restarted agent refuses until its clock has an estimate (a second or two).
            var answer = await control.command(.setRecording(request), deviceID: writer.deviceID, nodeID: nodeID)
            for _ in 0..<30 where !answer.status.isOK && writers.writer(takeID: take.id, deviceID: writer.deviceID) != nil {
                try? await Task.sleep(for: .seconds(1))
                answer = await control.command(.setRecording(request), deviceID: writer.deviceID, nodeID: nodeID)
            }
            if !answer.status.isOK {
                logger.error("the agent does not take up its part of the take again", metadata: [
                    "take.id": "\(take.id)", "device.id": "\(writer.deviceID)", "reason": "\(answer.status.reason)"])
            }
            if let stop = take.stopFleetNs, answer.status.isOK {
                _ = await control.command(.setRecording(.with {
                    $0.recording = false
                    $0.take = take.id
                    $0.stopFleetNs = stop
                }), deviceID: writer.deviceID, nodeID: nodeID)
            }
        }
    }

    /// A node went silent: each of its parts is interrupted until its frames flow again.
    func nodeOffline(_ nodeID: String) async {
        let now = fleetTime.now()
        for writer in writers.of(nodeID: nodeID) {
            let key = TakeWriters.Key(takeID: writer.takeID, deviceID: writer.deviceID)
            guard interrupted.insert(key).inserted else { continue }
            await note(writer, kind: "interrupted", at: now, detail: ["reason": "node \(nodeID) went silent"])
            try? await store.modifyTakeDevice(takeID: writer.takeID, deviceID: writer.deviceID) { if $0.state != .stopped { $0.state = .interrupted } }
            events.emit(.recording, nodeID: nodeID, deviceID: writer.deviceID, message: "take \(writer.takeID): \(writer.deviceID) interrupted (node \(nodeID) went silent)")
        }
    }

    /// Consent was denied, revoked or restricted: the device's part of every take stops now,
    /// and what its agent has not sent yet stays on its host.
    func consentWithdrawn(deviceID: String, state: String, reason: String) async {
        let now = fleetTime.now()
        for writer in writers.of(deviceID: deviceID) {
            writer.post(.stop(at: now))
            await note(writer, kind: "consent", at: now, detail: ["state": state, "reason": reason])
            _ = await control.command(.setRecording(.with {
                $0.recording = false
                $0.take = writer.takeID
                $0.stopFleetNs = now
                $0.consentStop = true
            }), deviceID: deviceID, nodeID: writer.nodeID)
            events.emit(.recording, nodeID: writer.nodeID, deviceID: deviceID, message: "take \(writer.takeID): \(deviceID) stopped, consent \(state)")
            logger.notice("consent withdrawn: the device's part of the take stops", metadata: ["take.id": "\(writer.takeID)", "device.id": "\(deviceID)"])
        }
    }

    /// Client-supplied metadata for a take (or one of its devices), at `at` (fleet ns; nil = now).
    func note(takeID: String, deviceID: String?, fields: [String: Any], at: UInt64?) async throws -> TakeRecord {
        guard let take = try await store.take(id: takeID) else {
            throw TakeRefusal(code: .notFound, message: "no take \(takeID); see capfleet recordings list")
        }
        let parts = writers.of(takeID: takeID).filter { deviceID == nil || $0.deviceID == deviceID }
        guard take.state == .recording, !parts.isEmpty else {
            throw TakeRefusal(code: .unavailable, message: deviceID.map { "take \(takeID) is not recording \($0) now" } ?? "take \(takeID) is not recording now")
        }
        let fleetNs = at ?? fleetTime.now()
        var fields = fields
        fields["fleet_ns"] = fleetNs
        let json = Self.json(any: fields)
        for writer in parts { writer.post(.note(json: json, at: fleetNs)) }
        try await store.recordTakeEvent(TakeEventRecord(takeId: takeID, deviceId: deviceID ?? "", fleetNs: fleetNs,
                                                        kind: fields["kind"] as? String ?? "note", detail: json))
        return take
    }

    /// An operator changed a device (format, frame rate, zoom, focus, policy): noted in every
    /// take recording it.
    func deviceChanged(_ deviceID: String, fields: [String: Any]) async {
        let now = fleetTime.now()
        for writer in writers.of(deviceID: deviceID) {
            var fields = fields
            fields["fleet_ns"] = now
            let json = Self.json(any: fields)
            writer.post(.note(json: json, at: now))
            try? await store.recordTakeEvent(TakeEventRecord(takeId: writer.takeID, deviceId: deviceID, fleetNs: now,
                                                             kind: fields["kind"] as? String ?? "change", detail: json))
        }
    }

    /// A device's own event (interrupted: unplugged, in use, pressure; resumed): noted in its takes.
    func deviceEvent(_ deviceID: String, kind: String, detail: String) async {
        let now = fleetTime.now()
        for writer in writers.of(deviceID: deviceID) {
            await note(writer, kind: kind, at: now, detail: ["detail": detail, "source": "device"])
        }
    }

    /// Stops every part's thread (each finishes its open segment). Parts stay in progress in
    /// the index: the next start goes on with them.
    func shutdown() async {
        for writer in writers.all() { await writer.shutdown() }
        await hasher.stop()
    }

    // MARK: Parts

    private func startWriter(take: TakeRecord, device: TakeDeviceRecord, segmentsSoFar: Int, frameRate: Double) {
        let index = StoreSegmentIndex(store: store, clock: { Date().unixMilliseconds })
        let recorder = DeviceTakeRecorder(takeID: take.id, title: "\(take.name) — \(device.deviceId)", directory: take.directory,
                                          start: take.startFleetNs, stop: take.stopFleetNs,
                                          segmentLength: UInt64(configuration.segmentSeconds) * 1_000_000_000, index: index,
                                          resuming: device, segmentsSoFar: segmentsSoFar)
        recorder.hasher = hasher
        let endpoint = self.endpoint
        let key = TakeWriters.Key(takeID: take.id, deviceID: device.deviceId)
        let writer = TakeDeviceWriter(
            takeID: take.id, deviceID: device.deviceId, nodeID: device.nodeId, recorder: recorder, instance: device.agentInstance,
            offset: device.sequenceOffset, ended: false, frameRate: frameRate,
            reserve: TakeDeviceWriter.DiskReserve(directory: take.directory, bytes: configuration.recordReserveBytes), logger: logger,
            send: { routing, message in endpoint.send(to: routing, message) },
            onEvent: { [weak self] event in Task { await self?.partEvent(event, key: key, nodeID: device.nodeId) } })
        writers.add(writer)
        openParts[take.id, default: []].insert(device.deviceId)
    }

    private func partEvent(_ event: TakeDeviceWriter.Event, key: TakeWriters.Key, nodeID: String) async {
        let now = fleetTime.now()
        switch event {
        case let .agentChanged(instance, restarted):
            try? await store.modifyTakeDevice(takeID: key.takeID, deviceID: key.deviceID) { $0.agentInstance = instance }
            if restarted, let writer = writers.writer(takeID: key.takeID, deviceID: key.deviceID) {
                await note(writer, kind: "interrupted", at: now, detail: ["reason": "the agent restarted; frames it had not sent are lost"])
            }
        case let .rebased(offset):
            try? await store.modifyTakeDevice(takeID: key.takeID, deviceID: key.deviceID) { $0.sequenceOffset = offset }
        case .flowing:
            try? await store.modifyTakeDevice(takeID: key.takeID, deviceID: key.deviceID) {
                if $0.state == .waiting || $0.state == .interrupted { $0.state = .recording }
            }
            if interrupted.remove(key) != nil, let writer = writers.writer(takeID: key.takeID, deviceID: key.deviceID) {
                await note(writer, kind: "resumed", at: now, detail: [:])
                events.emit(.recording, nodeID: nodeID, deviceID: key.deviceID, message: "take \(key.takeID): \(key.deviceID) resumed")
            }
        case let .ended(reason, withheld):
            try? await store.modifyTakeDevice(takeID: key.takeID, deviceID: key.deviceID) {
                $0.state = .stopped
                $0.endReason = reason
                $0.withheldFrames = Int64(clamping: withheld)
            }
            try? await store.recordTakeEvent(TakeEventRecord(takeId: key.takeID, deviceId: key.deviceID, fleetNs: now, kind: "ended",
                                                             detail: Self.json(["reason": reason, "withheld_frames": "\(withheld)"])))
            await partClosed(key)
        case let .failed(message):
            try? await store.modifyTakeDevice(takeID: key.takeID, deviceID: key.deviceID) {
                $0.state = .failed
                $0.endReason = message
            }
            try? await store.recordTakeEvent(TakeEventRecord(takeId: key.takeID, deviceId: key.deviceID, fleetNs: now, kind: "failed",
                                                             detail: Self.json(["error": message])))
            events.emit(.recording, nodeID: nodeID, deviceID: key.deviceID, message: "take \(key.takeID): \(key.deviceID) failed: \(message)")
            // A full disk fails every part alike: the take stops with the error, what is written stays valid.
            try? await store.failTake(id: key.takeID, error: "\(key.deviceID): \(message)")
            for writer in writers.of(takeID: key.takeID) where writer.deviceID != key.deviceID {
                writer.post(.stop(at: now))
                _ = await control.command(.setRecording(.with {
                    $0.recording = false
                    $0.take = key.takeID
                    $0.stopFleetNs = now
                }), deviceID: writer.deviceID, nodeID: writer.nodeID)
            }
            await partClosed(key)
        }
    }

    private func partClosed(_ key: TakeWriters.Key) async {
        if let writer = writers.remove(takeID: key.takeID, deviceID: key.deviceID) {
            Task { await writer.shutdown() }
        }
        interrupted.remove(key)
        openParts[key.takeID]?.remove(key.deviceID)
        // The emptied entry stays until the take is marked stopped: whoever waits for the
        // take (stop_recording) must find it stopped when woken.
        guard openParts[key.takeID]?.isEmpty ?? false else { return }
        let take = try? await store.take(id: key.takeID)
        if take?.state == .recording {
            try? await store.endTake(id: key.takeID, state: .stopped, stopFleetNs: take?.stopFleetNs ?? fleetTime.now(), at: Date().unixMilliseconds,
                                     audit: AuditEntry(at: Date().unixMilliseconds, actor: "coordinator", action: "recording.stored", target: key.takeID,
                                                       outcome: "ok", detail: "every device's part is stored"))
        }
        openParts[key.takeID] = nil
        events.emit(.recording, message: "take \(key.takeID) is stored")
        releaseWaiters(of: key.takeID)
    }

    /// A timed-metadata entry: in the index, and in the part's file.
    private func note(_ writer: TakeDeviceWriter, kind: String, at fleetNs: UInt64, detail: [String: String]) async {
        var fields = detail
        fields["kind"] = kind
        fields["fleet_ns"] = "\(fleetNs)"
        let json = Self.json(fields)
        writer.post(.note(json: json, at: fleetNs))
        try? await store.recordTakeEvent(TakeEventRecord(takeId: writer.takeID, deviceId: writer.deviceID, fleetNs: fleetNs, kind: kind, detail: json))
    }

    static func json(any fields: [String: Any]) -> String {
        guard JSONSerialization.isValidJSONObject(fields),
              let data = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys, .withoutEscapingSlashes]) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    static func json(_ fields: [String: String]) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys, .withoutEscapingSlashes]) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    /// Take ids sort by time and say when: take-20261123-194501-3f2a.
    static func takeID(at date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd-HHmmss"
        return "take-" + formatter.string(from: date) + "-" + UUID().uuidString.lowercased().prefix(4)
    }
}
