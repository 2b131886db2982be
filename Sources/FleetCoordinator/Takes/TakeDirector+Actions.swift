import FleetCore
import FleetProtocol
import FleetRecording
import FleetStore
import Foundation
import Logging

/// How the take director performs what the book decided. Nothing here decides: an outcome
/// that matters (an agent's refusal, the index refusing a write) goes back to the book.
extension TakeDirector {
    struct OrderRefusal: Sendable {
        let part: TakeBook.Part
        let reason: String
    }

    /// Performs `actions` in order; returns the orders agents refused.
    @discardableResult
    func perform(_ actions: [TakeBook.Action]) async -> [OrderRefusal] {
        var refusals: [OrderRefusal] = []
        for action in actions {
            switch action {
            case let .startWriter(part, nodeID):
                startWriter(part, nodeID: nodeID)
            case let .stopWriter(part, at):
                writers.writer(takeID: part.takeID, deviceID: part.deviceID)?.post(.stop(at: at))
            case let .closeWriter(part):
                writerSetups[part] = nil
                if let writer = writers.remove(takeID: part.takeID, deviceID: part.deviceID) {
                    closing.removeAll { $0.isCancelled }
                    closing.append(Task { await writer.shutdown() })
                }
            case let .order(part, nodeID, order):
                let answer = await agents.command(
                    .setRecording(recordingOrder(part, order)), deviceID: part.deviceID, nodeID: nodeID,
                    timeout: .seconds(3))
                if !answer.status.isOK { refusals.append(OrderRefusal(part: part, reason: answer.status.reason)) }
            case let .note(part, kind, fleetNs, fields):
                let json = Self.json(fields.merging(["kind": kind, "fleet_ns": "\(fleetNs)"]) { _, new in new })
                noteInFile(part, json: json, at: fleetNs)
                await indexNote(TakeEventRecord(takeId: part.takeID, deviceId: part.deviceID, fleetNs: fleetNs, kind: kind, detail: json))
            case let .indexEvent(part, kind, fleetNs, fields):
                await indexNote(
                    TakeEventRecord(takeId: part.takeID, deviceId: part.deviceID, fleetNs: fleetNs, kind: kind, detail: Self.json(fields)))
            case let .write(write):
                await perform(write)
            case let .announce(nodeID, deviceID, message):
                events.emit(.recording, nodeID: nodeID ?? "", deviceID: deviceID ?? "", message: message)
            case let .settled(takeID):
                releaseWaiters(of: takeID)
            }
        }
        return refusals
    }

    /// An index write; a failure fails the take (the book says how), and is seen.
    private func perform(_ write: TakeBook.IndexWrite) async {
        let now = clock.unixMilliseconds()
        do {
            switch write {
            case let .partRecording(part):
                try await store.modifyTakeDevice(takeID: part.takeID, deviceID: part.deviceID) {
                    if $0.state == .waiting || $0.state == .interrupted { $0.state = .recording }
                }
            case let .partInterrupted(part):
                try await store.modifyTakeDevice(takeID: part.takeID, deviceID: part.deviceID) { if $0.state != .stopped { $0.state = .interrupted } }
            case let .partEnded(part, reason, withheld):
                try await store.modifyTakeDevice(takeID: part.takeID, deviceID: part.deviceID) {
                    $0.state = .stopped
                    $0.endReason = reason
                    $0.withheldFrames = Int64(clamping: withheld)
                }
            case let .partFailed(part, message):
                try await store.modifyTakeDevice(takeID: part.takeID, deviceID: part.deviceID) {
                    $0.state = .failed
                    $0.endReason = message
                }
            case let .agentInstance(part, instance):
                try await store.modifyTakeDevice(takeID: part.takeID, deviceID: part.deviceID) { $0.agentInstance = instance }
            case let .sequenceOffset(part, offset):
                try await store.modifyTakeDevice(takeID: part.takeID, deviceID: part.deviceID) { $0.sequenceOffset = offset }
            case let .takeStored(takeID, stop):
                try await store.endTake(
                    id: takeID, state: .stopped, stopFleetNs: stop, at: now,
                    audit: AuditEntry(
                        at: now, actor: "coordinator", action: "recording.stored", target: takeID,
                        outcome: "ok", detail: "every device's part is stored"))
                // Not waited for: what listens (an offload) takes as long as it takes.
                for listener in storedListeners { Task { await listener(takeID) } }
            case let .takeFailed(takeID, error):
                try await store.failTake(id: takeID, error: error, at: now)
            case let .takeAbandoned(takeID, error):
                let take = try await store.take(id: takeID)
                try await store.endTake(
                    id: takeID, state: .failed, stopFleetNs: take?.startFleetNs, at: now, error: error,
                    audit: AuditEntry(
                        at: now, actor: take?.createdBy ?? "coordinator", action: "recording.start", target: takeID,
                        outcome: "failed", detail: error))
            }
        } catch {
            logger.error("the recordings index refused a write", metadata: ["write": "\(write)", "error": "\(error)"])
            switch write {
            case let .takeFailed(takeID, _), let .takeAbandoned(takeID, _), let .takeStored(takeID, _):
                // Nothing more the book can do about the take's own row: say so, loudly.
                events.emit(.recording, message: "take \(takeID): the recordings index could not record its end: \(error)")
            default:
                await perform(
                    book.indexFailed(
                        takeID: Self.takeID(of: write), writing: Self.describe(write), error: "\(error)",
                        nowFleetNs: clock.fleetNow()))
            }
        }
    }

    /// Timed metadata into the part's file: the coordinator's writer, or the agent writing it.
    func noteInFile(_ part: TakeBook.Part, json: String, at fleetNs: UInt64, track: MetadataTrack = .notes) {
        if let writer = writers.writer(takeID: part.takeID, deviceID: part.deviceID) {
            writer.post(.note(json: json, at: fleetNs, track: track))
        } else if book.store(of: part.takeID) == .agent, let nodeID = book.node(of: part) {
            let sent = links.send(
                to: nodeID, takeID: part.takeID, deviceID: part.deviceID,
                .note(
                    .with {
                        $0.json = json
                        $0.fleetNs = fleetNs
                        $0.detection = track == .detections
                        $0.sensors = track == .sensors
                    }))
            if !sent, unlinkedNotes.insert(part).inserted {
                logger.warning(
                    "timed metadata for a part held on its node cannot reach it: the node's recordings link has not attached since this coordinator started",
                    metadata: ["take.id": "\(part.takeID)", "device.id": "\(part.deviceID)", "node.id": "\(nodeID)"])
                events.emit(
                    .recording, deviceID: part.deviceID,
                    message:
                        "take \(part.takeID): timed metadata for \(part.deviceID) cannot reach node \(nodeID), whose recordings link has not attached"
                )
            }
        }
    }

    /// Timed metadata in the index. The part's file has it already; the take goes on, and
    /// the failure is an event and a log line.
    func indexNote(_ event: TakeEventRecord) async {
        do {
            try await store.recordTakeEvent(event)
        } catch {
            logger.error("cannot index a take's timed metadata", metadata: ["take.id": "\(event.takeId)", "error": "\(error)"])
            events.emit(
                .recording, deviceID: event.deviceId,
                message: "take \(event.takeId): the recordings index could not record a \(event.kind) entry: \(error)")
        }
    }

    private func startWriter(_ part: TakeBook.Part, nodeID: String) {
        guard let setup = writerSetups.removeValue(forKey: part) else {
            logger.error("a part's writer was asked for without its take", metadata: ["take.id": "\(part.takeID)", "device.id": "\(part.deviceID)"])
            return
        }
        let (store, clock, hasher) = (self.store, self.clock, self.hasher)
        let take = setup.take
        let segmentLength = UInt64(configuration.segmentSeconds) * 1_000_000_000
        // Made on the writer's thread, where it is used.
        let makeRecorder: @Sendable () -> DeviceTakeRecorder = {
            let recorder = DeviceTakeRecorder(
                takeID: take.id, deviceID: part.deviceID, title: "\(take.name) — \(part.deviceID)", directory: take.directory,
                start: take.startFleetNs, stop: take.stopFleetNs, segmentLength: segmentLength,
                index: StoreSegmentIndex(store: store, clock: clock.unixMilliseconds),
                resuming: setup.device.tally, segmentsSoFar: setup.segmentsSoFar)
            recorder.hasher = hasher
            return recorder
        }
        let writer = TakeDeviceWriter(
            takeID: take.id, deviceID: part.deviceID, nodeID: nodeID, recorder: makeRecorder, instance: setup.device.agentInstance,
            offset: setup.device.sequenceOffset, ended: false, frameRate: setup.frameRate,
            reserve: TakeDeviceWriter.DiskReserve(directory: take.directory, bytes: configuration.recordReserveBytes), logger: logger,
            send: links.sendToConnection,
            onEvent: { [weak self] event in Task { await self?.report(event, from: part) } })
        writers.add(writer)
    }

    /// What an agent is told of its part: with an agent-held take, also where and how to write it.
    func recordingOrder(_ part: TakeBook.Part, _ order: TakeBook.AgentOrder) -> Capfleet_V1_SetRecording {
        var message = Self.setRecording(part.takeID, order)
        if case .record = order {
            // The segment length goes to both stores: an agent's encoder starts each segment
            // with a key frame.
            message.segmentSeconds = UInt32(clamping: configuration.segmentSeconds)
            if let encoding = partEncodings[part] ?? takeEncodings[part.takeID], encoding.codec != .raw { message.encoding = encoding.wire }
            if book.store(of: part.takeID) == .agent {
                message.store = .agent
                message.title = "\(takeNames[part.takeID] ?? part.takeID) — \(part.deviceID)"
            } else {
                message.store = .coordinator
            }
        }
        return message
    }

    static func setRecording(_ takeID: String, _ order: TakeBook.AgentOrder) -> Capfleet_V1_SetRecording {
        .with {
            $0.take = takeID
            switch order {
            case let .record(start):
                $0.recording = true
                $0.startFleetNs = start
            case let .stop(at):
                $0.recording = false
                $0.stopFleetNs = at
            case let .withhold(at):
                $0.recording = false
                $0.stopFleetNs = at
                $0.consentStop = true
            case let .abandon(at):
                $0.recording = false
                $0.stopFleetNs = at
                $0.notStarted = true
            }
        }
    }

    private static func takeID(of write: TakeBook.IndexWrite) -> String {
        switch write {
        case let .partRecording(part), let .partInterrupted(part), let .partEnded(part, _, _), let .partFailed(part, _),
            let .agentInstance(part, _), let .sequenceOffset(part, _):
            part.takeID
        case let .takeStored(takeID, _), let .takeFailed(takeID, _), let .takeAbandoned(takeID, _):
            takeID
        }
    }

    private static func describe(_ write: TakeBook.IndexWrite) -> String {
        switch write {
        case let .partRecording(part): "that \(part.deviceID) records"
        case let .partInterrupted(part): "that \(part.deviceID) was interrupted"
        case let .partEnded(part, _, _): "the end of \(part.deviceID)'s part"
        case let .partFailed(part, _): "the failure of \(part.deviceID)'s part"
        case let .agentInstance(part, _): "\(part.deviceID)'s new agent"
        case let .sequenceOffset(part, _): "\(part.deviceID)'s sequence offset"
        case .takeStored: "that the take is stored"
        case .takeFailed: "that the take failed"
        case .takeAbandoned: "that the take never started"
        }
    }

    static func json(any fields: [String: Any]) -> String {
        guard JSONSerialization.isValidJSONObject(fields),
            let data = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    static func json(_ fields: [String: String]) -> String { json(any: fields) }

    /// Take ids sort by time and say when: take-20261123-194501-3f2a.
    static func takeID(at date: Date) -> String { TimestampedID.make("take", at: date) }
}
