import FleetCore
import FleetProtocol
import FleetStorage
import FleetStore
import FleetSystem
import Foundation
import Logging
import SwiftProtobuf

/// `recordings offload` (recordings.md, "Offload"): each node holding segments of the take
/// copies them straight to the destination, one at a time per node and the nodes in parallel;
/// the coordinator copies only what it holds itself (takes recorded here, or a collected copy
/// of a node that is gone). Each copy is proved by SHA-256 and recorded in the index; then the
/// take's index and sync report go beside the files as JSON. One run per take and destination
/// at a time; asked again while one runs, it is that run; asked again after, it goes on from
/// what is proved there.
actor TakeOffloads {
    struct RunKey: Hashable, Sendable {
        let takeID: String
        let destination: String
    }

    /// How a run ended (kept until the next one starts).
    struct Ending: Sendable {
        let error: String
        let destinationFull: Bool
    }

    private let store: FleetDatabase
    private let links: AgentRecordLinks
    private let secrets: StorageSecrets
    private let events: FleetEvents
    private let clock: CoordinatorClock
    private let logger: Logger
    private let isOnline: @Sendable (String) async -> Bool
    private var running: [RunKey: Task<Void, Never>] = [:]
    private var endings: [RunKey: Ending] = [:]
    /// The coordinator's own copies under way, bytes sent so far.
    private var sendingHere: [RunKey: UInt64] = [:]

    /// How often an order no node answered goes again.
    static let reorder = Duration.seconds(30)
    /// Attempts at one segment's copy within a run, and the pause between them.
    static let attempts = 3
    static let retryPause = Duration.seconds(5)

    init(
        store: FleetDatabase, links: AgentRecordLinks, secrets: StorageSecrets, events: FleetEvents, clock: CoordinatorClock, logger: Logger,
        isOnline: @escaping @Sendable (String) async -> Bool
    ) {
        self.store = store
        self.links = links
        self.secrets = secrets
        self.events = events
        self.clock = clock
        self.logger = logger
        self.isOnline = isOnline
    }

    /// Starts offloading `take` to the destination named, unless a run is under way. Returns
    /// how many segments are not yet proved there.
    func offload(_ take: TakeRecord, to name: String, by caller: String) async throws -> Int {
        guard let record = try await store.storageDestinations().first(where: { $0.name == name }) else {
            throw OffloadRefusal(code: .notFound, message: "no storage destination \(name); see capfleet storage list")
        }
        let kept = try secrets.load(name)
        if let missing = record.secretKeyList.first(where: { kept[$0] == nil }) {
            throw OffloadRefusal(
                code: .unavailable,
                message:
                    "storage destination \(name)'s secret \(missing) is not on this coordinator (a restored backup?): add the destination again with it"
            )
        }
        let destination: StorageDestination
        do {
            destination = try StorageDestination(
                name: record.name, backend: record.backend, options: record.options, secrets: kept, root: record.root)
        } catch {
            throw OffloadRefusal(code: .internal, message: "storage destination \(name) as kept is not usable: \(error)")
        }
        guard take.state != .recording else {
            throw OffloadRefusal(code: .badRequest, message: "take \(take.id) is still recording: stop it first (capfleet record stop \(take.id))")
        }
        let key = RunKey(takeID: take.id, destination: name)
        let left = try await unproved(take.id, on: name)
        try await retell(take.id, on: name)
        guard running[key] == nil else { return left.count }
        endings[key] = nil
        running[key] = Task { await self.run(take, to: destination, segments: left, by: caller) }
        try await store.appendAudit(
            AuditEntry(
                at: clock.unixMilliseconds(), actor: OperatorCaller.holder(caller), action: "recording.offload", target: take.id, outcome: "ok",
                detail: "to \(name): \(left.count) segments to copy"))
        return left.count
    }

    /// The policy (`storage add --offload-when-stopped`): a take just stored goes to every
    /// destination that asks for it.
    func takeStored(_ takeID: String) async {
        do {
            guard let take = try await store.take(id: takeID) else { return }
            for destination in try await store.storageDestinations() where destination.offloadWhenStopped {
                do {
                    let left = try await offload(take, to: destination.name, by: "coordinator (offload when stopped)")
                    logger.info(
                        "a stored take is offloaded by policy",
                        metadata: ["take.id": "\(takeID)", "destination": "\(destination.name)", "segments": "\(left)"])
                } catch {
                    events.emit(.recording, message: "take \(takeID): offload to \(destination.name) (when stopped) could not start: \(error)")
                }
            }
        } catch {
            logger.error("cannot read the storage destinations for a stored take", metadata: ["take.id": "\(takeID)", "error": "\(error)"])
        }
    }

    func isRunning(_ takeID: String, to destination: String) -> Bool { running[RunKey(takeID: takeID, destination: destination)] != nil }

    func ending(_ takeID: String, to destination: String) -> Ending? { endings[RunKey(takeID: takeID, destination: destination)] }

    /// Bytes sent so far of the take's copies under way to the destination (the agents' and ours).
    func bytesSending(_ takeID: String, to destination: String) -> UInt64 {
        links.desk.offloadBytesSending(takeID: takeID, destination: destination)
            + sendingHere[RunKey(takeID: takeID, destination: destination), default: 0]
    }

    /// The destinations the take has a run under way or ended on (since this coordinator started).
    func destinations(of takeID: String) -> Set<String> {
        Set((Array(running.keys) + Array(endings.keys)).filter { $0.takeID == takeID }.map(\.destination))
    }

    private func unproved(_ takeID: String, on name: String) async throws(StoreError) -> [SegmentRecord] {
        let proved = Set(
            try await store.segmentCopies(takeID: takeID).filter { $0.destination == name && $0.state == .verified }.map {
                SegmentKey(deviceID: $0.deviceId, number: $0.number)
            })
        return try await store.segments(takeID: takeID).filter {
            $0.state != .open && !$0.sha256.isEmpty && !proved.contains(SegmentKey(deviceID: $0.deviceId, number: $0.number))
        }
    }

    /// Tells the hosts again which of their segments are proved there (a host offline when
    /// its copy was proved did not hear it, and its retention would keep the file for ever).
    private func retell(_ takeID: String, on name: String) async throws(StoreError) {
        for copy in try await store.segmentCopies(takeID: takeID) where copy.destination == name && copy.state == .verified {
            guard let nodeID = copy.nodeId else { continue }
            links.send(
                to: nodeID, takeID: takeID, deviceID: copy.deviceId,
                .collected(
                    .with {
                        $0.number = UInt32(copy.number)
                        $0.destination = name
                    }))
        }
    }

    private struct SegmentKey: Hashable {
        let deviceID: String
        let number: Int
    }

    private func run(_ take: TakeRecord, to destination: StorageDestination, segments: [SegmentRecord], by caller: String) async {
        let key = RunKey(takeID: take.id, destination: destination.name)
        // Who sends each: the node holding it while it is there; else the coordinator, if it has the file.
        var byNode: [String: [SegmentRecord]] = [:]
        for segment in segments {
            if let nodeID = segment.nodeId, await isOnline(nodeID) || segment.collectedPath == nil {
                byNode[nodeID, default: []].append(segment)
            } else {
                byNode["", default: []].append(segment)
            }
        }
        let outcomes = await withTaskGroup(of: NodeOutcome.self) { group in
            for (nodeID, own) in byNode {
                group.addTask {
                    nodeID.isEmpty
                        ? await self.sendHere(own, of: take, to: destination) : await self.order(own, from: nodeID, of: take, to: destination)
                }
            }
            var all: [NodeOutcome] = []
            for await outcome in group { all.append(outcome) }
            return all
        }
        var failures = outcomes.flatMap(\.failures)
        let full = outcomes.contains { $0.destinationFull }
        // The index beside the files, as far as they go: downstream tools read it without us.
        if let problem = await writeIndex(of: take, to: destination) { failures.append(problem) }
        running[key] = nil
        sendingHere[key] = nil
        endings[key] = Ending(error: failures.joined(separator: "; "), destinationFull: full)
        let message =
            failures.isEmpty
            ? "take \(take.id): offloaded to \(destination.name), every segment's SHA-256 proved there"
            : "take \(take.id): offload to \(destination.name) failed: " + failures.joined(separator: "; ")
        events.emit(.recording, message: message)
        logger.notice(
            "offload ended",
            metadata: ["take.id": "\(take.id)", "destination": "\(destination.name)", "failures": "\(failures.count)", "by": "\(caller)"])
    }

    private struct NodeOutcome: Sendable {
        var failures: [String] = []
        var destinationFull = false
    }

    /// One node's segments in order, each copy ordered from it; stops at a full destination
    /// or the node gone, goes on past a segment that failed alone.
    private func order(_ segments: [SegmentRecord], from nodeID: String, of take: TakeRecord, to destination: StorageDestination) async -> NodeOutcome
    {
        var outcome = NodeOutcome()
        guard await isOnline(nodeID), links.isReachable(nodeID) else {
            let missing = segments.map { "\($0.deviceId) #\($0.number)" }.joined(separator: ", ")
            outcome.failures.append("node \(nodeID) is offline: its segments \(missing) are only on its disk; offload again when it is back")
            return outcome
        }
        let wire = Self.wire(destination)
        for segment in segments.sorted(by: { ($0.deviceId, $0.number) < ($1.deviceId, $1.number) }) {
            let objectPath = destination.layout.segment(
                takeID: take.id, deviceID: segment.deviceId, fileName: (segment.path as NSString).lastPathComponent)
            let request = Capfleet_V1_OffloadSegment.with {
                $0.number = UInt32(segment.number)
                $0.sizeBytes = UInt64(max(segment.sizeBytes, 0))
                $0.sha256 = segment.sha256
                $0.destination = wire
                $0.objectPath = objectPath
            }
            let links = self.links, isOnline = self.isOnline
            var answer: Capfleet_V1_SegmentOffloaded?
            // A copy that failed on its way (a link cut, a server restarting) is tried again a
            // few times; one held back, a full destination or a node gone is not.
            for attempt in 1...Self.attempts {
                answer = await links.desk.awaitOffload(
                    AgentRecordingsDesk.OffloadKey(
                        nodeID: nodeID, takeID: take.id, deviceID: segment.deviceId, number: UInt32(segment.number), destination: destination.name),
                    reorder: Self.reorder,
                    order: { links.send(to: nodeID, takeID: take.id, deviceID: segment.deviceId, .offload(request)) },
                    stillThere: { await isOnline(nodeID) })
                guard let failed = answer, !failed.verified, !failed.heldBack, !failed.destinationFull, attempt < Self.attempts else { break }
                logger.warning(
                    "a segment's offload failed; trying again",
                    metadata: ["take.id": "\(take.id)", "node.id": "\(nodeID)", "segment": "\(segment.number)", "error": "\(failed.error)"])
                try? await Task.sleep(for: Self.retryPause)
            }
            guard let answer else {
                outcome.failures.append(
                    "node \(nodeID) went offline while it offloaded segment \(segment.number) of \(segment.deviceId), and was not back within \(AgentRecordingsDesk.offloadPatience): offload again when it is"
                )
                return outcome
            }
            let copy = SegmentCopyRecord(
                takeId: take.id, deviceId: segment.deviceId, number: segment.number, destination: destination.name, objectPath: objectPath,
                state: answer.verified ? .verified : answer.heldBack ? .heldBack : .failed, proof: answer.proof,
                sentBytes: Int64(clamping: answer.sentBytes), error: answer.error, nodeId: nodeID, at: clock.unixMilliseconds())
            if let problem = await record(copy) {
                outcome.failures.append(problem)
            } else if answer.verified {
                // Safe there: the host's retention may remove its own file now.
                links.send(
                    to: nodeID, takeID: take.id, deviceID: segment.deviceId,
                    .collected(
                        .with {
                            $0.number = UInt32(segment.number)
                            $0.destination = destination.name
                        }))
            }
            if !answer.replacedCorruptCopy.isEmpty {
                events.emit(
                    .recording,
                    message:
                        "take \(take.id): a corrupt copy of segment \(segment.number) of \(segment.deviceId) on \(destination.name) was replaced (\(answer.replacedCorruptCopy))"
                )
            }
            if !answer.verified {
                outcome.failures.append("segment \(segment.number) of \(segment.deviceId) (node \(nodeID)): \(answer.error)")
                if answer.destinationFull {
                    outcome.destinationFull = true
                    return outcome
                }
            }
        }
        return outcome
    }

    /// The segments whose files are on this coordinator's disk, sent from here.
    private func sendHere(_ segments: [SegmentRecord], of take: TakeRecord, to destination: StorageDestination) async -> NodeOutcome {
        var outcome = NodeOutcome()
        let key = RunKey(takeID: take.id, destination: destination.name)
        let rclone: Rclone
        do {
            rclone = try Rclone(destination: destination)
        } catch {
            outcome.failures.append(error.description)
            return outcome
        }
        for segment in segments.sorted(by: { ($0.deviceId, $0.number) < ($1.deviceId, $1.number) }) {
            let file = segment.nodeId == nil ? segment.path : segment.collectedPath ?? segment.path
            let objectPath = destination.layout.segment(
                takeID: take.id, deviceID: segment.deviceId, fileName: (segment.path as NSString).lastPathComponent)
            let uploader = SegmentUploader(rclone: rclone, bytesPerSecond: 0)
            let (size, sha256) = (UInt64(max(segment.sizeBytes, 0)), segment.sha256)
            let report = await OwnedThread.run("cf-offload") { [weak self] in
                uploader.offload(
                    file: file, sizeBytes: size, sha256: sha256, to: objectPath,
                    progress: { sent in Task { await self?.noteSending(key, sent) } })
            }
            sendingHere[key] = nil
            var copy = SegmentCopyRecord(
                takeId: take.id, deviceId: segment.deviceId, number: segment.number, destination: destination.name, objectPath: objectPath,
                state: .failed, nodeId: nil, at: clock.unixMilliseconds())
            switch report.outcome {
            case let .verified(sentBytes, proof):
                copy.state = .verified
                copy.proof = proof.rawValue
                copy.sentBytes = Int64(clamping: sentBytes)
            case let .failed(reason, full):
                copy.error = reason
                outcome.failures.append("segment \(segment.number) of \(segment.deviceId) (on the coordinator): \(reason)")
                if full { outcome.destinationFull = true }
            }
            if let problem = await record(copy) { outcome.failures.append(problem) }
            if outcome.destinationFull { return outcome }
        }
        return outcome
    }

    private func noteSending(_ key: RunKey, _ sent: UInt64) {
        if running[key] != nil { sendingHere[key] = sent }
    }

    /// Records a copy's outcome; what went wrong if the index could not.
    private func record(_ copy: SegmentCopyRecord) async -> String? {
        do {
            try await store.recordSegmentCopy(copy)
            return nil
        } catch {
            logger.error("cannot record a segment's copy", metadata: ["take.id": "\(copy.takeId)", "error": "\(error)"])
            return
                "segment \(copy.number) of \(copy.deviceId) is \(copy.state.rawValue) on \(copy.destination), but the index could not record it: \(error)"
        }
    }

    /// take.json and sync-report.json on the destination (the layout in recordings.md).
    private func writeIndex(of take: TakeRecord, to destination: StorageDestination) async -> String? {
        let json: (index: Data, sync: Data?)
        do {
            json = try await Self.indexJSON(take, on: destination, store: store)
        } catch {
            return "the take's index could not be made for \(destination.name): \(error)"
        }
        let layout = destination.layout
        let problem: String? = await OwnedThread.run("cf-offload") {
            do throws(RcloneError) {
                let rclone = try Rclone(destination: destination)
                try rclone.write(json.index, to: layout.takeIndex(take.id))
                if let sync = json.sync { try rclone.write(sync, to: layout.syncReport(take.id)) }
                return nil
            } catch {
                return "the take's index could not be written to \(destination.name): \(error)"
            }
        }
        return problem
    }

    /// The take as `recordings show --json` has it, the copies on this destination in each
    /// segment, in proto3's JSON form; its sync report beside it.
    static func indexJSON(_ take: TakeRecord, on destination: StorageDestination, store: FleetDatabase) async throws -> (index: Data, sync: Data?) {
        let segments = try await store.segments(takeID: take.id)
        let copies = try await store.segmentCopies(takeID: take.id).filter { $0.destination == destination.name }
        let info = TakeCatalog.wire(
            take, devices: try await store.takeDevices(takeID: take.id), segments: segments, events: try await store.takeEvents(takeID: take.id),
            copies: copies)
        var options = JSONEncodingOptions()
        options.preserveProtoFieldNames = true
        let index = Data(try info.jsonString(options: options).utf8)
        guard let stored = try await store.takeSync(takeID: take.id)?.report else { return (index, nil) }
        let report = try Capfleet_V1_TakeSyncReport(serializedBytes: stored)
        return (index, Data(try report.jsonString(options: options).utf8))
    }

    static func wire(_ destination: StorageDestination) -> Capfleet_V1_StorageDestination {
        .with {
            $0.name = destination.name
            $0.backend = destination.backend
            $0.options = destination.options
            $0.secrets = destination.secrets
            $0.root = destination.layout.root
        }
    }
}

/// An offload refused as asked, and what to do.
struct OffloadRefusal: Error, CustomStringConvertible {
    let code: Capfleet_V1_StatusCode
    let message: String
    var description: String { message }
}
