import FleetCore
import FleetProtocol
import FleetStore
import FleetSystem
import Foundation
import Logging

/// Why a still was refused as a whole, with the status the operator sees.
struct StillRefusal: Error, CustomStringConvertible {
    let code: Capfleet_V1_StatusCode
    let description: String
}

extension StillRefusal {
    init(_ refusal: StillBook.Refusal) {
        code =
            switch refusal.kind {
            case .badRequest: .badRequest
            case .notFound: .notFound
            case .unavailable: .unavailable
            case .permissionDenied: .permissionDenied
            }
        description = refusal.description
    }
}

/// Synchronised stills (stills.md): asks every camera's agent for its picture at one fleet
/// instant, indexes what they wrote, and copies the pictures to the coordinator's disk in the
/// background, one at a time per node (the nodes in parallel), each checked against the
/// SHA-256 its agent reported before it counts as stored; the agent then removes its copy.
///
/// The shell of `StillBook`: it takes no decision of its own across an await. The book says
/// whether a still may be asked for, which cameras are refused, how long their answers are
/// waited for, whether a copy starts and whether a still may be deleted; this performs it.
actor StillDirector {
    private let store: FleetDatabase
    private let control: any AgentCommands
    private let collector: SegmentCollector
    private let links: AgentRecordLinks
    private let clock: CoordinatorClock
    private let events: FleetEvents
    /// Where stills are kept: one directory per still.
    let directory: String
    private let logger: Logger
    private var book = StillBook()

    init(
        store: FleetDatabase, control: any AgentCommands, collector: SegmentCollector, links: AgentRecordLinks, clock: CoordinatorClock,
        events: FleetEvents, directory: String, logger: Logger
    ) {
        self.store = store
        self.control = control
        self.collector = collector
        self.links = links
        self.clock = clock
        self.events = events
        self.directory = directory
        self.logger = logger
    }

    /// The still's cameras answered once every picture is written on its host (or it could
    /// not take one); the copying goes on after this returns.
    func take(_ query: Capfleet_V1_TakeStill, by who: String) async throws -> StillEntry {
        let now = clock.fleetNow()
        let request = StillBook.Request(
            all: query.all, deviceIDs: query.deviceIds, width: query.width, height: query.height, bracketEV: query.bracketEv,
            atFleetTimeNs: query.atFleetTimeNs, fromNowNs: query.fromNowNs, streamingFormat: query.streamingFormat)
        let instant: UInt64
        switch StillBook.instant(of: request, now: now) {
        case let .success(chosen): instant = chosen
        case let .failure(refusal): throw StillRefusal(refusal)
        }
        var devices: [DeviceRecord] = []
        if query.all {
            // Cameras only: a sensor stream takes no pictures.
            for device in try await store.devices() where SourceKind(rawValue: device.kind)?.isCamera != false {
                if await control.isOnline(device.nodeId) { devices.append(device) }
            }
            guard !devices.isEmpty else { throw StillRefusal(code: .unavailable, description: "no camera is online") }
        } else {
            for deviceID in query.deviceIds where !devices.contains(where: { $0.id == deviceID }) {
                guard let device = try await store.device(deviceID) else {
                    throw StillRefusal(code: .notFound, description: "no device \(deviceID); see capfleet devices")
                }
                devices.append(device)
            }
        }
        // Cameras without consent (or offline) are named in the still, refused; the rest go on.
        var cameras: [StillBook.Camera] = []
        for device in devices {
            let consent = try await store.consent(deviceID: device.id)?.consentState ?? .notDetermined
            cameras.append(
                StillBook.Camera(deviceID: device.id, nodeID: device.nodeId, consent: consent, online: await control.isOnline(device.nodeId)))
        }
        let (refused, refusal, reasons) = StillBook.screen(cameras)
        if let refusal {
            try await store.appendAudit(
                AuditEntry(
                    at: clock.unixMilliseconds(), actor: who, action: "still.take", target: "",
                    outcome: "refused", detail: reasons))
            throw StillRefusal(refusal)
        }
        let id = Self.stillID(at: Date(timeIntervalSince1970: Double(clock.unixMilliseconds()) / 1000))
        let encoding = query.encoding == .jpeg ? "jpeg" : "png"
        let still = StillRecord(
            id: id, name: query.name.isEmpty ? id : query.name, requestedFleetNs: instant, encoding: encoding,
            bracket: query.bracketEv, directory: directory + "/" + id, createdAt: clock.unixMilliseconds(), createdBy: who)
        let rows = devices.map { device in
            StillDeviceRecord(
                stillId: id, deviceId: device.id, nodeId: device.nodeId, state: refused[device.id] == nil ? .capturing : .failed,
                error: refused[device.id] ?? "")
        }
        let refusedNote = refused.isEmpty ? "" : "; refused: " + refused.keys.sorted().joined(separator: ", ")
        try await store.createStill(
            still, devices: rows,
            audit: AuditEntry(
                at: still.createdAt, actor: who, action: "still.take", target: id, outcome: "ok",
                detail:
                    "\(devices.count - refused.count) camera(s) at fleet time \(instant), \(query.streamingFormat ? "streaming format" : query.width == 0 ? "max" : "\(query.width)x\(query.height)"), \(encoding)"
                    + (query.bracketEv.isEmpty ? "" : ", bracket \(still.bracket) EV") + refusedNote))

        // Every camera at once: each answers when its pictures are written.
        let pictures = max(query.bracketEv.count, 1)
        let interval = UInt64(query.bracketIntervalMs == 0 ? 300 : query.bracketIntervalMs) * 1_000_000
        let untilLast = (instant > now ? instant - now : 0) + UInt64(pictures - 1) * interval
        let timeout = Duration.nanoseconds(Int64(StillBook.answerWaitNanoseconds(untilLast: untilLast, pictures: pictures)))
        let nodeNames = Dictionary(try await store.nodes().map { ($0.id, $0.name) }, uniquingKeysWith: { a, _ in a })
        let control = self.control
        let asked = devices.filter { refused[$0.id] == nil }
        let answers = await withTaskGroup(of: (DeviceRecord, Capfleet_V1_CommandReply).self) { group in
            for device in asked {
                group.addTask {
                    let reply = await control.command(
                        .captureStill(
                            .with {
                                $0.stillID = id
                                $0.fleetTimeNs = instant
                                $0.width = query.width
                                $0.height = query.height
                                $0.pixelFormat = query.pixelFormat
                                $0.bracketEv = query.bracketEv
                                $0.bracketIntervalMs = query.bracketIntervalMs
                                $0.encoding = query.encoding
                                $0.jpegQuality = query.jpegQuality
                                $0.nodeName = nodeNames[device.nodeId] ?? ""
                                $0.streamingFormat = query.streamingFormat
                            }), deviceID: device.id, nodeID: device.nodeId, timeout: timeout)
                    return (device, reply)
                }
            }
            var answers: [(DeviceRecord, Capfleet_V1_CommandReply)] = []
            for await answer in group { answers.append(answer) }
            return answers
        }
        for (device, reply) in answers {
            try await record(reply, of: device, in: still)
        }
        let entry = try await store.still(id: id)
        startCollecting(id)
        let taken = entry?.devices.filter { $0.state != .failed }.count ?? 0
        events.emit(.recording, message: "still \(id): \(taken) of \(devices.count) camera(s) took their picture")
        logger.notice("still taken", metadata: ["still.id": "\(id)", "cameras": "\(taken)/\(devices.count)", "fleet_ns": "\(instant)"])
        guard let entry else { throw StillRefusal(code: .internal, description: "still \(id) is gone from the index") }
        return entry
    }

    /// One camera's answer: its pictures indexed and their sidecars written beside where the
    /// pictures will be, or why it has none.
    private func record(_ reply: Capfleet_V1_CommandReply, of device: DeviceRecord, in still: StillRecord) async throws {
        guard reply.status.isOK else {
            try await store.recordStillCapture(stillID: still.id, deviceID: device.id, images: [], awayNs: 0, failure: reply.status.reason)
            return
        }
        let images = Self.images(reply.still, of: device.id, in: still.id)
        if let problem = await writeSidecars(images, into: still.directory) {
            try await store.recordStillCapture(stillID: still.id, deviceID: device.id, images: [], awayNs: reply.still.awayNs, failure: problem)
            return
        }
        try await store.recordStillCapture(stillID: still.id, deviceID: device.id, images: images, awayNs: reply.still.awayNs, failure: nil)
    }

    private static func images(_ captured: Capfleet_V1_StillCaptured, of deviceID: String, in stillID: String) -> [StillImageRecord] {
        captured.images.map { image in
            let ext = image.mediaType == "image/jpeg" ? "jpg" : "png"
            return StillImageRecord(
                stillId: stillID, deviceId: deviceID, number: Int(image.number), fileName: "\(deviceID)-\(image.number).\(ext)",
                agentPath: image.path, sizeBytes: Int64(clamping: image.sizeBytes), sha256: image.sha256, mediaType: image.mediaType,
                sidecarJson: image.sidecarJson, requestedFleetNs: image.requestedFleetNs, fleetTimeNs: image.fleetTimeNs, spreadNs: image.spreadNs,
                ev: image.ev, width: Int(image.layout.width), height: Int(image.layout.height), pixelFormat: image.layout.pixelFormat)
        }
    }

    /// The pictures' sidecars, written where the pictures will be; what went wrong, or nil.
    private func writeSidecars(_ images: [StillImageRecord], into folder: String) async -> String? {
        let sidecars = images.map { (folder + "/" + ($0.fileName as NSString).deletingPathExtension + ".json", $0.sidecarJson) }
        let problem = await OwnedThread.run("cf-files") { () -> String? in
            do {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                for (path, json) in sidecars { try Data(json.utf8).write(to: URL(fileURLWithPath: path), options: .atomic) }
                return nil
            } catch {
                return "\(error)"
            }
        }
        return problem.map { "its sidecars could not be written in \(folder): \($0)" }
    }

    /// At the coordinator's start: cameras of an earlier run's stills that never answered (it
    /// stopped while they took their pictures) fail, saying so; pictures their agents wrote
    /// are adopted when the agents report them (`held`).
    func endUnanswered() async throws {
        for entry in try await store.stills() where entry.devices.contains(where: { $0.state == .capturing }) {
            try await store.failUnansweredStillDevices(
                stillID: entry.still.id,
                reason: "the coordinator stopped before the camera answered; pictures its agent wrote are copied when it reports them",
                at: clock.unixMilliseconds())
        }
    }

    // MARK: What the agents' recordings links say

    /// Takes the links' news in turn until the stream ends (the coordinator stops).
    func follow(_ news: AsyncStream<AgentStillNews>) async {
        for await item in news {
            switch item {
            case let .held(report): await held(report)
            case let .attached(nodeID): await resumeCollecting(from: nodeID)
            }
        }
    }

    /// A camera's pictures its agent holds and the index has not acknowledged: indexed now if
    /// its answer never came (too late, or before this coordinator started), then acknowledged.
    /// Unacknowledged, the agent reports them again in 3 s.
    private func held(_ report: AgentStillReport) async {
        let acknowledge = { _ = self.links.send(to: report.nodeID, takeID: report.stillID, deviceID: report.deviceID, .stillIndexed(.init())) }
        do {
            guard let entry = try await store.still(id: report.stillID) else {
                // Deleted (its agent was offline then): the files stay until someone removes them.
                logger.warning(
                    "an agent holds pictures of a still the index does not know",
                    metadata: [
                        "still.id": "\(report.stillID)", "device.id": "\(report.deviceID)", "node.id": "\(report.nodeID)",
                        "files": "\(report.captured.images.map(\.path).joined(separator: ", "))",
                    ])
                return acknowledge()
            }
            let images = Self.images(report.captured, of: report.deviceID, in: report.stillID)
            let alreadyIndexed = entry.images.contains { $0.deviceId == report.deviceID }
            let answering = entry.devices.contains { $0.deviceId == report.deviceID && $0.state == .capturing }
            if StillBook.heldPicturesNeedSidecars(alreadyIndexed: alreadyIndexed, answering: answering, pictures: images.count),
                let problem = await writeSidecars(images, into: entry.still.directory)
            {
                logger.error("cannot adopt a still's pictures", metadata: ["still.id": "\(report.stillID)", "error": "\(problem)"])
                return
            }
            switch try await store.adoptStillPictures(
                stillID: report.stillID, deviceID: report.deviceID, nodeID: report.nodeID,
                images: images, awayNs: report.captured.awayNs)
            {
            case .adopted:
                events.emit(
                    .recording, nodeID: report.nodeID, deviceID: report.deviceID,
                    message:
                        "still \(report.stillID): \(report.deviceID)'s \(images.count) picture(s) reached the index after its answer was given up on; copying them"
                )
                logger.notice(
                    "still pictures adopted",
                    metadata: ["still.id": "\(report.stillID)", "device.id": "\(report.deviceID)", "pictures": "\(images.count)"])
                startCollecting(report.stillID)
            case .alreadyIndexed:
                break
            case .awaitingAnswer:
                return  // unacknowledged: by the next report the answer has brought them

            case .unknown:
                logger.warning(
                    "an agent reported pictures of a camera that is not the still's on its node",
                    metadata: [
                        "still.id": "\(report.stillID)", "device.id": "\(report.deviceID)", "node.id": "\(report.nodeID)",
                    ])
            }
            acknowledge()
        } catch {
            // Unacknowledged: the agent reports them again.
            logger.error("cannot index an agent's still pictures", metadata: ["still.id": "\(report.stillID)", "error": "\(error)"])
        }
    }

    /// A node's link is here (again, or for the first time since this coordinator started):
    /// the pictures it holds that are not copied yet are copied now.
    private func resumeCollecting(from nodeID: String) async {
        do {
            let stills = Set(try await store.uncollectedStillImages().filter { $0.nodeID == nodeID }.map(\.image.stillId))
            for stillID in stills.sorted() { startCollecting(stillID) }
        } catch {
            logger.error("cannot list the pictures left to copy", metadata: ["node.id": "\(nodeID)", "error": "\(error)"])
        }
    }

    /// Copies the still's pictures not yet here, unless a copy of it runs already.
    func startCollecting(_ stillID: String) {
        guard book.startCollecting(stillID) else { return }
        Task { await self.collect(stillID) }
    }

    func isCollecting(_ stillID: String) -> Bool { book.isCollecting(stillID) }

    private func collect(_ stillID: String) async {
        do {
            guard let entry = try await store.still(id: stillID) else { return finishCollecting(stillID) }
            let pending = try await store.uncollectedStillImages().filter { $0.image.stillId == stillID }
            let byNode = Dictionary(grouping: pending) { $0.nodeID }
            await withTaskGroup(of: Void.self) { group in
                for (nodeID, own) in byNode {
                    group.addTask { await self.collect(own.map(\.image), from: nodeID, into: entry.still.directory) }
                }
            }
        } catch {
            logger.error("cannot copy a still's pictures", metadata: ["still.id": "\(stillID)", "error": "\(error)"])
        }
        finishCollecting(stillID)
    }

    private func finishCollecting(_ stillID: String) { book.finishedCollecting(stillID) }

    /// One node's pictures in order; stops at its first failure (the node is gone, most likely).
    private func collect(_ images: [StillImageRecord], from nodeID: String, into folder: String) async {
        for image in images {
            let file = SegmentCollector.AgentFile(
                key: .init(kind: .still, takeID: image.stillId, deviceID: image.deviceId, number: UInt32(image.number)),
                sizeBytes: UInt64(max(image.sizeBytes, 0)), sha256: image.sha256)
            let outcome = await collector.collect(file, from: nodeID, to: folder + "/" + image.fileName, through: links)
            do {
                switch outcome {
                case let .success(path):
                    try await store.markStillImageStored(
                        stillID: image.stillId, deviceID: image.deviceId, number: image.number, path: path,
                        at: clock.unixMilliseconds())
                    _ = links.send(
                        to: nodeID, takeID: image.stillId, deviceID: image.deviceId, .stillCollected(.with { $0.number = UInt32(image.number) }))
                case let .failure(failure):
                    try await store.noteStillCollectProblem(
                        stillID: image.stillId, deviceID: image.deviceId,
                        problem: "copying its pictures failed: \(failure); exporting the still tries again")
                    logger.warning(
                        "a still's picture was not copied",
                        metadata: [
                            "still.id": "\(image.stillId)", "device.id": "\(image.deviceId)",
                            "error": "\(failure)",
                        ])
                    return
                }
            } catch {
                logger.error("cannot record a still picture's copy", metadata: ["still.id": "\(image.stillId)", "error": "\(error)"])
                return
            }
        }
    }

    /// Forgets the still and removes its pictures, here and on the agents still holding them.
    func delete(_ stillID: String, by who: String) async throws {
        let entry = try await store.still(id: stillID)
        if let refusal = book.deletion(of: stillID, known: entry != nil) { throw StillRefusal(refusal) }
        guard let entry else { return }
        try await store.deleteStill(
            id: stillID,
            audit: AuditEntry(
                at: clock.unixMilliseconds(), actor: who, action: "still.delete", target: stillID,
                outcome: "ok", detail: "\(entry.images.count) picture(s)"))
        for image in entry.images where image.storedPath == nil {
            let node = entry.devices.first { $0.deviceId == image.deviceId }?.nodeId ?? ""
            // The same message as after a copy: the agent removes its picture.
            _ = links.send(to: node, takeID: stillID, deviceID: image.deviceId, .stillCollected(.with { $0.number = UInt32(image.number) }))
        }
        // A camera whose answer never came may have written pictures all the same: number 0 is all of them.
        for device in entry.devices where !entry.images.contains(where: { $0.deviceId == device.deviceId }) {
            _ = links.send(to: device.nodeId, takeID: stillID, deviceID: device.deviceId, .stillCollected(.with { $0.number = 0 }))
        }
        let folder = entry.still.directory
        let problem = await OwnedThread.run("cf-files") { () -> String? in
            guard FileManager.default.fileExists(atPath: folder) else { return nil }
            do { try FileManager.default.removeItem(atPath: folder) } catch { return "\(error)" }
            return nil
        }
        if let problem {
            throw StillRefusal(
                code: .internal, description: "still \(stillID) left the index but its directory \(folder) could not be removed: \(problem)")
        }
    }

    /// Still ids sort by time and say when: still-20261127-101500-3f2a.
    static func stillID(at date: Date) -> String { TimestampedID.make("still", at: date) }
}
