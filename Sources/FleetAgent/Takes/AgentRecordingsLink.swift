import FleetBus
import FleetCore
import FleetProtocol
import FleetRecording
import FleetSystem
import Foundation
import Logging
import Synchronization

/// The agent's end of the coordinator's index of takes recorded here (record.proto, "Takes
/// recorded on the agents"): a DEALER of its own to the recording endpoint, on a thread of its
/// own. It reports each finished segment and each part's end until the coordinator says its
/// index holds them (so nothing is lost to a partition or a restart of either side), and it
/// serves the coordinator's requests: chunks of a segment for collect (at most the configured
/// rate, and only while the device's consent is granted), checks for verify, and deletions.
final class AgentRecordingsLink: Sendable {
    private let loop: SocketLoop
    private let dealer: SocketLoop.SocketID
    private let state: ThreadBound<LinkState>
    private let connectedEndpoint = SocketEndpoint()
    private let logger: Logger
    /// Checks run here: reading a segment back takes seconds.
    private let checker: OwnedWorker<@Sendable () -> Void>
    /// Copies to storage destinations: each takes as long as its bytes at the collect rate.
    private let offloader: AgentOffloader

    init(
        context: ZMQContext, coordinatorKey: CurvePublicKey, keys: CurveKeyPair, store: AgentTakeStore, stills: StillWriter, agentInstance: String,
        consentAllows: @escaping @Sendable (String) -> Bool, logger: Logger
    ) throws(ZMQError) {
        let socket = try ZMQSocket(context: context, type: .dealer)
        try socket.makeCurveClient(serverKey: coordinatorKey, keys: keys)
        try socket.use(.bulk)
        // Reports wait in the manifests, not in libzmq, while the coordinator is away.
        try socket.set(SocketSetup.agentRecordLink)
        let loop = SocketLoop(name: "recordings")
        self.loop = loop
        self.logger = logger
        checker = OwnedWorker(name: "cf-verify", handle: { job in job() })
        let state = loop.bind(LinkState(store: store, stills: stills, instance: agentInstance, consentAllows: consentAllows, logger: logger))
        self.state = state
        let dealer = loop.add(socket, onReadable: { socket in state.value.receive(from: socket) })
        self.dealer = dealer
        let offloader = AgentOffloader(
            store: store, consentAllows: consentAllows,
            answer: { part, body in
                loop.perform { sockets in state.value.send(LinkState.message(takeID: part.takeID, deviceID: part.deviceID, body), on: sockets[dealer])
                }
            }, logger: logger)
        self.offloader = offloader
        loop.perform { [checker] _ in
            state.value.socketID = dealer
            state.value.offload = { request, part in offloader.order(request, of: part) }
            state.value.check = { request, key, answer in
                checker.post { answer(LinkState.check(request, key: key, store: store)) }
            }
            state.value.answerOnLoop = { message in
                loop.perform { sockets in state.value.send(message, on: sockets[dealer]) }
            }
        }
        // Idle until a fetch arrives; then as often as the rate limit lets chunks go.
        let fetchTimer = loop.timer(after: 0) { sockets in state.value.serveFetches(sockets[dealer]) }
        loop.perform { sockets in
            state.value.fetchArrived = { sockets.schedule(fetchTimer, after: 0) }
        }
        loop.every(nanoseconds: 500_000_000) { sockets in state.value.tick(sockets[dealer]) }
        store.reportable.withLock { $0 = { loop.perform { sockets in state.value.report(on: sockets[dealer]) } } }
        loop.start()
    }

    /// Points the DEALER at the coordinator's recording endpoint (from WELCOME) and reports
    /// everything not yet acknowledged: the coordinator may have restarted.
    func connect(to endpoint: String) {
        let dealer = self.dealer, logger = self.logger, state = self.state
        connectedEndpoint.move(
            dealer, of: loop, to: endpoint,
            failed: { error in
                logger.error("cannot connect the recordings socket", metadata: ["endpoint": "\(endpoint)", "error": "\(error)"])
            }, then: { sockets in state.value.connectionRenewed(sockets[dealer]) })
    }

    func stop() {
        loop.stop()
        checker.stopBlocking()
        offloader.stop()
    }
}

/// The link's thread's own state.
private final class LinkState {
    let store: AgentTakeStore
    let stills: StillWriter
    let instance: String
    let consentAllows: @Sendable (String) -> Bool
    let logger: Logger
    var socketID: SocketLoop.SocketID?
    var check: ((Capfleet_V1_CheckSegment, TakeDeviceKey, @escaping @Sendable (Capfleet_V1_RecordUp) -> Void) -> Void)?
    var answerOnLoop: (@Sendable (Capfleet_V1_RecordUp) -> Void)?
    var offload: ((Capfleet_V1_OffloadSegment, TakeDeviceKey) -> Void)?
    /// Wakes the fetch timer (set on the loop thread, called there).
    var fetchArrived: (() -> Void)?
    /// When each report last went (take, device, segment number; 0 for the part's end).
    private var lastSent: [ReportKey: UInt64] = [:]
    /// When the stills' directory was last looked at for pictures to report.
    private var lastStillScan: UInt64 = 0
    private var lastAttach: UInt64 = 0
    private var lastRetention: UInt64 = 0
    /// Fetches waiting for the rate limit, in arrival order.
    private var fetches: [(key: TakeDeviceKey, request: Capfleet_V1_FetchSegment, still: Bool)] = []
    private var budget: Double = 0
    private var lastRefill = MonotonicTime.now()

    struct ReportKey: Hashable {
        let part: TakeDeviceKey
        let number: Int
    }

    static let resendInterval: UInt64 = 3_000_000_000

    init(store: AgentTakeStore, stills: StillWriter, instance: String, consentAllows: @escaping @Sendable (String) -> Bool, logger: Logger) {
        self.store = store
        self.stills = stills
        self.instance = instance
        self.consentAllows = consentAllows
        self.logger = logger
    }

    func connectionRenewed(_ socket: ZMQSocket) {
        lastSent.removeAll()
        lastAttach = 0
        lastStillScan = 0
        tick(socket)
    }

    func tick(_ socket: ZMQSocket) {
        let now = MonotonicTime.now()
        if now &- lastAttach >= 5_000_000_000 {
            let parts = store.allParts.map(\.current)
            let attach = Self.message(
                takeID: "", deviceID: "",
                .attach(
                    .with {
                        $0.agentInstance = instance
                        $0.partsHeld = UInt32(parts.count)
                        $0.bytesHeld = UInt64(max(parts.reduce(0) { $0 + $1.bytesOnDisk }, 0))
                        $0.freeBytes = UInt64(max(DiskSpace.availableBytes(at: store.settings.directory) ?? 0, 0))
                    }))
            if send(attach, on: socket) { lastAttach = now }
        }
        report(on: socket)
        if now &- lastRetention >= 60_000_000_000 {
            lastRetention = now
            for path in store.applyRetention() {
                logger.info("retention removed a segment safe elsewhere", metadata: ["path": "\(path)"])
            }
        }
    }

    /// Sends every report not yet acknowledged whose last sending is older than the resend
    /// interval; one never sent goes at once.
    func report(on socket: ZMQSocket) {
        let now = MonotonicTime.now()
        func due(_ key: ReportKey) -> Bool {
            guard let sent = lastSent[key] else { return true }
            return now &- sent >= Self.resendInterval
        }
        for file in store.allParts {
            let manifest = file.current
            let part = TakeDeviceKey(takeID: manifest.takeID, deviceID: manifest.deviceID)
            for segment in manifest.segments where segment.isReportable && !segment.indexed {
                let key = ReportKey(part: part, number: segment.number)
                guard due(key) else { continue }
                if send(Self.message(takeID: part.takeID, deviceID: part.deviceID, .segment(Self.wire(segment))), on: socket) { lastSent[key] = now }
            }
            // The end goes once every segment is indexed: the coordinator then holds the whole part.
            guard let end = manifest.end, !end.acknowledged, !store.isWriting(part),
                manifest.segments.allSatisfy({ $0.indexed })
            else { continue }
            let key = ReportKey(part: part, number: 0)
            guard due(key) else { continue }
            let ending = Self.message(
                takeID: part.takeID, deviceID: part.deviceID,
                .partEnd(
                    .with {
                        $0.segments = UInt32(manifest.segments.map(\.number).max() ?? 0)
                        $0.reason = end.reason
                        $0.failed = end.failed
                        if let tally = manifest.lastTally { $0.part = Self.wire(tally) }
                    }))
            if send(ending, on: socket) { lastSent[key] = now }
        }
        // Stills' pictures the index has not acknowledged (the answer to CaptureStill came too
        // late, or the coordinator restarted): reported until it does.
        guard now &- lastStillScan >= Self.resendInterval else { return }
        lastStillScan = now
        for held in stills.held() {
            let key = ReportKey(part: TakeDeviceKey(takeID: held.stillID, deviceID: held.deviceID), number: -1)
            guard due(key) else { continue }
            if send(Self.message(takeID: held.stillID, deviceID: held.deviceID, .stillHeld(held.captured)), on: socket) { lastSent[key] = now }
        }
    }

    func receive(from socket: ZMQSocket) {
        while let received = try? socket.receiveMultipart(dontWait: true, maxParts: 2) {
            guard received.parts.count == 1, let message = try? Capfleet_V1_RecordDown(serializedBytes: received.parts[0].array) else {
                logger.warning("the coordinator sent something that is not a RecordDown on the recordings link")
                continue
            }
            let key = TakeDeviceKey(takeID: message.takeID, deviceID: message.deviceID)
            switch message.body {
            case let .indexed(indexed)?:
                mark(key, "noting an indexed segment") { manifest in
                    if let index = manifest.segments.firstIndex(where: { $0.number == Int(indexed.number) }) {
                        manifest.segments[index].indexed = true
                    }
                }
                lastSent[ReportKey(part: key, number: Int(indexed.number))] = nil
                // The end may be due now.
                report(on: socket)
            case .done?:
                mark(key, "noting the part's end acknowledged") { $0.end?.acknowledged = true }
                logger.info("the coordinator indexed the part", metadata: ["take.id": "\(key.takeID)", "device.id": "\(key.deviceID)"])
            case let .collected(collected)?:
                mark(key, collected.destination.isEmpty ? "noting a collected segment" : "noting an offloaded segment") { manifest in
                    guard let index = manifest.segments.firstIndex(where: { $0.number == Int(collected.number) }) else { return }
                    if collected.destination.isEmpty {
                        manifest.segments[index].collected = true
                    } else if !(manifest.segments[index].offloadedTo ?? []).contains(collected.destination) {
                        manifest.segments[index].offloadedTo = (manifest.segments[index].offloadedTo ?? []) + [collected.destination]
                    }
                }
            case let .fetch(fetch)?:
                fetches.append((key, fetch, false))
                fetchArrived?()
            case let .fetchStill(fetch)?:
                // A still's id stands in the take's place; its pictures share the collect rate.
                fetches.append((key, fetch, true))
                fetchArrived?()
            case .stillIndexed?:
                stills.acknowledged(stillID: key.takeID, deviceID: key.deviceID)
                lastSent[ReportKey(part: key, number: -1)] = nil
            case let .stillCollected(collected)?:
                if let problem = collected.number == 0
                    ? stills.removeAll(stillID: key.takeID, deviceID: key.deviceID)
                    : stills.remove(stillID: key.takeID, deviceID: key.deviceID, number: Int(collected.number))
                {
                    logger.error("cannot remove a collected still's picture", metadata: ["still.id": "\(key.takeID)", "error": "\(problem)"])
                }
            case let .check(request)?:
                guard let answerOnLoop else { continue }
                check?(request, key, answerOnLoop)
            case .deletePart?:
                if let problem = store.remove(key) {
                    logger.error("cannot remove a deleted take's part", metadata: ["take.id": "\(key.takeID)", "error": "\(problem)"])
                } else {
                    logger.notice("a deleted take's part was removed", metadata: ["take.id": "\(key.takeID)", "device.id": "\(key.deviceID)"])
                }
            case let .note(note)?:
                store.note(key, json: note.json, at: note.fleetNs, track: note.sensors ? .sensors : note.detection ? .detections : .notes)
            case let .refused(status)?:
                // The files stay: only a deletion removes them.
                logger.error(
                    "the coordinator refused a report of a part held here",
                    metadata: [
                        "take.id": "\(key.takeID)", "device.id": "\(key.deviceID)", "reason": "\(status.reason)",
                    ])
            case let .offload(request)?:
                offload?(request, key)
            case .credit?, nil:
                continue
            }
        }
    }

    /// Serves the waiting fetches the rate limit allows now; returns when to try again (the
    /// budget for the next chunk), or nil when none waits.
    func serveFetches(_ socket: ZMQSocket) -> UInt64? {
        guard !fetches.isEmpty else { return nil }
        let rate = Double(store.settings.collectBytesPerSecond)
        let now = MonotonicTime.now()
        if rate > 0 {
            // At most a quarter second's worth saved up: a burst never takes the disk from the cameras for long.
            budget = min(budget + Double(now &- lastRefill) / 1e9 * rate, max(rate / 4, Double(1 << 20)))
        }
        lastRefill = now
        while let (key, request, still) = fetches.first {
            let length = Int(min(request.length == 0 ? 1 << 20 : request.length, 1 << 20))
            if rate > 0 {
                guard budget >= Double(length) else {
                    // When the budget will cover it, at least a millisecond away.
                    return max(UInt64((Double(length) - budget) / rate * 1e9), 1_000_000)
                }
                budget -= Double(length)
            }
            fetches.removeFirst()
            serve(request, of: key, still: still, length: length, on: socket)
        }
        return nil
    }

    private func serve(_ request: Capfleet_V1_FetchSegment, of key: TakeDeviceKey, still: Bool, length: Int, on socket: ZMQSocket) {
        var chunk = Capfleet_V1_SegmentChunk()
        chunk.number = request.number
        chunk.offset = request.offset
        var bytes: [UInt8] = []
        // The file asked for: a still's picture, or a finished segment of a part held here.
        let path =
            still
            ? stills.path(stillID: key.takeID, deviceID: key.deviceID, number: Int(request.number))
            : store.part(key)?.current.segments.first(where: { $0.number == Int(request.number) && $0.state != .open })?.path
        if !consentAllows(key.deviceID) {
            chunk.error = "device \(key.deviceID)'s consent is not granted now: its frames do not leave the host"
        } else if let path {
            switch Self.read(path, offset: request.offset, length: length) {
            case let .success((data, size)):
                bytes = data
                chunk.size = size
            case let .failure(error):
                chunk.error = "\(error)"
            }
        } else {
            chunk.error =
                still
                ? "this agent holds no picture \(request.number) of \(key.deviceID) in still \(key.takeID)"
                : "this agent holds no finished segment \(request.number) of \(key.deviceID) in \(key.takeID)"
        }
        let header = Self.message(takeID: key.takeID, deviceID: key.deviceID, still ? .stillChunk(chunk) : .chunk(chunk))
        guard let encoded: [UInt8] = try? header.serializedBytes() else { return }
        // Dropped if the socket is full: the coordinator asks again.
        _ = try? socket.send(parts: [encoded, bytes], dontWait: true)
    }

    private static func read(_ path: String, offset: UInt64, length: Int) -> Result<([UInt8], UInt64), SystemCallError> {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(SystemCallError(call: "open", target: path, errno: errno)) }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { return .failure(SystemCallError(call: "fstat", target: path, errno: errno)) }
        let size = UInt64(status.st_size)
        let wanted = offset >= size ? 0 : Int(min(UInt64(length), size - offset))
        do {
            return .success((try FileDescriptorIO.readExactly(fd, count: wanted, at: offset, target: path), size))
        } catch {
            return .failure(error)
        }
    }

    /// On the checker's thread: the file against what the coordinator's index says of it.
    static func check(_ request: Capfleet_V1_CheckSegment, key: TakeDeviceKey, store: AgentTakeStore) -> Capfleet_V1_RecordUp {
        var answer = Capfleet_V1_SegmentCheck()
        answer.number = request.number
        if let segment = store.part(key)?.current.segments.first(where: { $0.number == Int(request.number) }) {
            // What the coordinator's index says of it, against the file here.
            let indexed = IndexedSegment(
                deviceID: key.deviceID, number: segment.number, path: segment.path, sizeBytes: Int64(clamping: request.sizeBytes),
                sha256: request.sha256, frames: Int64(clamping: request.frames),
                firstFleetNs: request.firstFleetNs == 0 ? nil : request.firstFleetNs,
                lastFleetNs: request.lastFleetNs == 0 ? nil : request.lastFleetNs,
                firstSequence: request.frames == 0 ? nil : request.firstSequence, lastSequence: request.frames == 0 ? nil : request.lastSequence)
            let report = SegmentVerifier.verify(indexed, takeStart: request.takeStartFleetNs)
            answer.ok = report.ok
            answer.problems = report.problems
            answer.frames = UInt64(report.frames)
            answer.sizeBytes = UInt64(max(report.sizeBytes, 0))
        } else {
            answer.ok = false
            answer.problems = ["this agent holds no segment \(request.number) of \(key.deviceID) in \(key.takeID)"]
        }
        var message = Capfleet_V1_RecordUp()
        message.protocolVersion = WireDefaults.protocolMajor
        message.takeID = key.takeID
        message.deviceID = key.deviceID
        message.body = .check(answer)
        return message
    }

    @discardableResult
    func send(_ message: Capfleet_V1_RecordUp, on socket: ZMQSocket) -> Bool {
        guard let bytes: [UInt8] = try? message.serializedBytes() else { return false }
        return (try? socket.send(bytes, dontWait: true)) == true
    }

    private func mark(_ key: TakeDeviceKey, _ what: String, _ change: (inout AgentPartManifest) -> Void) {
        guard let file = store.part(key) else { return }
        do {
            try file.update(change)
        } catch {
            // The coordinator's answer is lost with it: the report goes again, and is answered again.
            logger.error("cannot save a part's manifest", metadata: ["doing": "\(what)", "error": "\(error)"])
        }
    }

    static func message(takeID: String, deviceID: String, _ body: Capfleet_V1_RecordUp.OneOf_Body) -> Capfleet_V1_RecordUp {
        .with {
            $0.protocolVersion = WireDefaults.protocolMajor
            $0.takeID = takeID
            $0.deviceID = deviceID
            $0.body = body
        }
    }

    static func wire(_ tally: ManifestTally) -> Capfleet_V1_PartTally {
        .with {
            $0.pixelFormat = tally.pixelFormat
            $0.width = UInt32(clamping: tally.width)
            $0.height = UInt32(clamping: tally.height)
            $0.frameRate = tally.frameRate
            $0.firstFleetNs = tally.firstFleetNs ?? 0
            $0.lastFleetNs = tally.lastFleetNs ?? 0
            $0.firstSequence = tally.firstSequence ?? 0
            $0.lastSequence = tally.lastSequence ?? 0
            $0.frames = tally.frames
            $0.bytes = UInt64(max(tally.bytes, 0))
            $0.drops = tally.drops.tally.wire
            $0.encoder = tally.encoder ?? ""
            $0.sourcePixelFormat = tally.sourcePixelFormat ?? ""
            $0.bitDepth = UInt32(clamping: tally.bitDepth ?? 0)
            if let colour = tally.colour.flatMap(ColourDescription.init) { $0.colour = colour.wire }
            $0.depthUnitMetres = tally.depthUnitMetres ?? 0
        }
    }

    static func wire(_ segment: ManifestSegment) -> Capfleet_V1_AgentSegment {
        .with {
            $0.number = UInt32(segment.number)
            $0.path = segment.path
            $0.state = segment.state.rawValue
            $0.sizeBytes = UInt64(max(segment.sizeBytes, 0))
            $0.sha256 = segment.sha256
            $0.frames = segment.frames
            $0.firstFleetNs = segment.firstFleetNs ?? 0
            $0.lastFleetNs = segment.lastFleetNs ?? 0
            $0.firstSequence = segment.firstSequence ?? 0
            $0.lastSequence = segment.lastSequence ?? 0
            $0.drops = segment.drops.tally.wire
            $0.part = wire(segment.tally)
        }
    }
}
