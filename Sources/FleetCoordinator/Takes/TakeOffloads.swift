import FleetCore
import FleetProtocol
import FleetStorage
import FleetStore
import FleetSystem
import Foundation
import Logging
import SwiftProtobuf

/// `recordings offload` (recordings.md, "Offload"): each node holding segments of the take
/// copies them straight to the destination, a few at a time per node and the nodes in parallel;
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
    private let metrics: FleetMetrics
    /// Bytes of each run's segments not yet proved (the metrics' pending bytes).
    private var pending: [RunKey: UInt64] = [:]
    private var running: [RunKey: Task<Void, Never>] = [:]
    private var endings: [RunKey: Ending] = [:]
    /// The coordinator's own copies under way, bytes sent so far.
    private var sendingHere: [RunKey: UInt64] = [:]
    /// The daily policy's decisions, and each destination's daily run under way.
    private var schedule = DailyOffloadSchedule()
    private var daily: [String: Task<Void, Never>] = [:]
    private var rclones: [String: (destination: StorageDestination, rclone: Rclone)] = [:]

    /// How often an order no node answered goes again.
    static let reorder = Duration.seconds(30)
    /// Attempts at one segment's copy within a run, and the pause between them.
    static let attempts = 3
    static let retryPause = Duration.seconds(5)

    init(
        store: FleetDatabase, links: AgentRecordLinks, secrets: StorageSecrets, events: FleetEvents, metrics: FleetMetrics, clock: CoordinatorClock,
        logger: Logger, isOnline: @escaping @Sendable (String) async -> Bool
    ) {
        self.metrics = metrics
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
        pending[key] = left.reduce(0) { $0 + UInt64(max($1.sizeBytes, 0)) }
        publishGauges(name)
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

    /// The daily policy (`storage add --offload-daily HH:MM`): a destination whose time has
    /// come today gets every stopped take not yet proved there, one take after another (a
    /// backlog of hundreds is not hundreds of runs at once). Called every few seconds.
    func scheduleTick(now: Date = Date()) async {
        let destinations: [StorageDestinationRecord]
        do {
            destinations = try await store.storageDestinations()
        } catch {
            logger.error("cannot read the storage destinations for the daily offloads", metadata: ["error": "\(error)"])
            return
        }
        var times: [String: Int] = [:]
        for destination in destinations {
            if let minute = DailyOffloadSchedule.minuteOfDay(destination.offloadDailyAt) { times[destination.name] = minute }
        }
        // The coordinator's local time (TZ), as the policy is given.
        let local = Int(now.timeIntervalSince1970.rounded(.down)) + TimeZone.current.secondsFromGMT(for: now)
        let (day, second) = local.quotientAndRemainder(dividingBy: 86_400)
        for name in schedule.due(times, day: day, minute: second / 60) where daily[name] == nil {
            let at = DailyOffloadSchedule.text(times[name] ?? 0)
            daily[name] = Task { await self.runDaily(to: name, at: at) }
        }
    }

    private func runDaily(to name: String, at: String) async {
        defer { daily[name] = nil }
        let takes: [TakeRecord]
        do {
            takes = try await store.takesNotProved(on: name)
        } catch {
            events.emit(.recording, message: "the daily offload to \(name) could not find its takes: \(error)")
            return
        }
        events.emit(.recording, message: "daily offload to \(name) (at \(at)): \(takes.count) take(s) not yet proved there")
        for take in takes {
            do {
                _ = try await offload(take, to: name, by: "coordinator (offload daily at \(at))")
            } catch {
                events.emit(.recording, message: "take \(take.id): the daily offload to \(name) could not start: \(error)")
                continue
            }
            await running[RunKey(takeID: take.id, destination: name)]?.value
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
        pending[key] = nil
        publishGauges(destination.name)
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

    /// What one segment's copy came to, for its node's run.
    private struct SegmentOutcome: Sendable {
        var failure: String?
        var destinationFull = false
        /// The node went away and was not back in time: its other segments wait for the next run.
        var nodeGone = false
    }

    /// Copies ordered from a node at once: twice an agent's own transfers (two), so the next
    /// ones wait there and it never idles for a round trip between two segments.
    static let window = 4

    /// One node's segments in order, `window` copies ordered from it at a time; stops at a
    /// full destination or the node gone, goes on past a segment that failed alone.
    private func order(_ segments: [SegmentRecord], from nodeID: String, of take: TakeRecord, to destination: StorageDestination) async -> NodeOutcome
    {
        var outcome = NodeOutcome()
        guard await isOnline(nodeID), links.isReachable(nodeID) else {
            let missing = segments.map { "\($0.deviceId) #\($0.number)" }.joined(separator: ", ")
            outcome.failures.append("node \(nodeID) is offline: its segments \(missing) are only on its disk; offload again when it is back")
            return outcome
        }
        let wire = Self.wire(destination)
        var queue = segments.sorted(by: { ($0.deviceId, $0.number) < ($1.deviceId, $1.number) })[...]
        await withTaskGroup(of: SegmentOutcome.self) { group in
            var stopped = false, saidGone = false
            for _ in 0..<Self.window {
                guard let segment = queue.popFirst() else { break }
                group.addTask { await self.copy(segment, from: nodeID, of: take, to: destination, wire: wire) }
            }
            for await result in group {
                if result.nodeGone {
                    // Said once, however many of its copies were out.
                    if !saidGone, let failure = result.failure { outcome.failures.append(failure) }
                    saidGone = true
                    stopped = true
                } else if let failure = result.failure {
                    outcome.failures.append(failure)
                }
                if result.destinationFull {
                    outcome.destinationFull = true
                    stopped = true
                }
                if !stopped, let segment = queue.popFirst() {
                    group.addTask { await self.copy(segment, from: nodeID, of: take, to: destination, wire: wire) }
                }
            }
        }
        return outcome
    }

    /// One segment's copy ordered from its node (tried again after a failure on its way),
    /// recorded, and told to the node once it is proved.
    private func copy(
        _ segment: SegmentRecord, from nodeID: String, of take: TakeRecord, to destination: StorageDestination, wire: Capfleet_V1_StorageDestination
    ) async -> SegmentOutcome {
        var outcome = SegmentOutcome()
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
            outcome.failure =
                "node \(nodeID) went offline while it offloaded segment \(segment.number) of \(segment.deviceId), and was not back within \(AgentRecordingsDesk.offloadPatience): offload again when it is"
            outcome.nodeGone = true
            return outcome
        }
        let copy = SegmentCopyRecord(
            takeId: take.id, deviceId: segment.deviceId, number: segment.number, destination: destination.name, objectPath: objectPath,
            state: answer.verified ? .verified : answer.heldBack ? .heldBack : .failed, proof: answer.proof,
            sentBytes: Int64(clamping: answer.sentBytes), error: answer.error, nodeId: nodeID, at: clock.unixMilliseconds())
        count(copy, sizeBytes: segment.sizeBytes)
        if let problem = await record(copy) {
            outcome.failure = problem
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
            outcome.failure = "segment \(segment.number) of \(segment.deviceId) (node \(nodeID)): \(answer.error)"
            outcome.destinationFull = answer.destinationFull
        }
        return outcome
    }

    /// The segments whose files are on this coordinator's disk, sent from here.
    private func sendHere(_ segments: [SegmentRecord], of take: TakeRecord, to destination: StorageDestination) async -> NodeOutcome {
        var outcome = NodeOutcome()
        let key = RunKey(takeID: take.id, destination: destination.name)
        let rclone: Rclone
        do {
            rclone = try await self.rclone(for: destination)
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
            var report: SegmentUploader.Report
            // As an agent's copy: one that failed on its way is tried twice more; a full destination is not.
            var attempt = 1
            while true {
                report = await OwnedThread.run("cf-offload") { [weak self] in
                    uploader.offload(
                        file: file, sizeBytes: size, sha256: sha256, to: objectPath,
                        progress: { sent in Task { await self?.noteSending(key, sent) } })
                }
                guard case .failed(let reason, false) = report.outcome, attempt < Self.attempts else { break }
                logger.warning(
                    "a segment's offload from the coordinator failed; trying again",
                    metadata: ["take.id": "\(take.id)", "segment": "\(segment.number)", "error": "\(reason)"])
                attempt += 1
                try? await Task.sleep(for: Self.retryPause)
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
            count(copy, sizeBytes: segment.sizeBytes)
            if let problem = await record(copy) { outcome.failures.append(problem) }
            if outcome.destinationFull { return outcome }
        }
        return outcome
    }

    /// A copy's outcome, in the metrics (and, proved, off its run's pending bytes).
    private func count(_ copy: SegmentCopyRecord, sizeBytes: Int64) {
        metrics.countOffload(to: copy.destination, outcome: copy.state.rawValue, sentBytes: UInt64(max(copy.sentBytes, 0)))
        guard copy.state == .verified else { return }
        let key = RunKey(takeID: copy.takeId, destination: copy.destination)
        if let left = pending[key] {
            pending[key] = left - min(left, UInt64(max(sizeBytes, 0)))
            publishGauges(copy.destination)
        }
    }

    private func publishGauges(_ destination: String) {
        let runs = pending.filter { $0.key.destination == destination }
        metrics.recordOffloads(to: destination, runs: runs.count, pendingBytes: runs.values.reduce(0, +))
    }

    /// rclone for the destination as it is now: its passwords obscured once, what it keeps learned once.
    private func rclone(for destination: StorageDestination) async throws(RcloneError) -> Rclone {
        if let known = rclones[destination.name], known.destination == destination { return known.rclone }
        // Made on a thread of its own: obscuring the passwords runs rclone.
        let made = try await OwnedThread.run("cf-offload") { Result { () throws(RcloneError) in try Rclone(destination: destination) } }.get()
        rclones[destination.name] = (destination, made)
        return made
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
        let rclone: Rclone
        do {
            rclone = try await self.rclone(for: destination)
        } catch {
            return "the take's index could not be written to \(destination.name): \(error)"
        }
        let problem: String? = await OwnedThread.run("cf-offload") {
            do throws(RcloneError) {
                try rclone.write(
                    [("take.json", json.index)] + (json.sync.map { [("sync-report.json", $0)] } ?? []), into: layout.takeFolder(take.id))
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
