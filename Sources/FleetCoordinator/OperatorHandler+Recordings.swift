import FleetCore
import FleetProtocol
import FleetRecording
import FleetStore
import FleetSystem
import Foundation

/// Takes: started and stopped through the director; listed, shown, checked, read and
/// deleted from the index and the files. File work runs on threads of its own.
extension OperatorHandler {
    func startRecording(_ query: Capfleet_V1_StartRecording, by caller: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        do {
            let store: TakeBook.Store? =
                switch query.store {
                case .agent: .agent
                case .coordinator: .coordinator
                default: nil
                }
            let take = try await takes.start(
                deviceIDs: query.deviceIds, name: query.name,
                at: query.atFleetTimeNs == 0 ? nil : query.atFleetTimeNs, fromNow: query.fromNowNs, store: store,
                encoding: TakeEncoding(wire: query.encoding),
                deviceEncodings: query.deviceEncodings.compactMapValues(TakeEncoding.init(wire:)), by: caller)
            reply.takes = [try await info(take, detailed: false)]
            reply.status = .ok
        } catch let refusal as TakeRefusal {
            reply.status = .failure(refusal.code, refusal.message)
        }
    }

    func stopRecording(_ query: Capfleet_V1_StopRecording, by caller: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        do {
            let at: UInt64? = query.atFleetTimeNs != 0 ? query.atFleetTimeNs : (query.fromNowNs != 0 ? clock.fleetNow() + query.fromNowNs : nil)
            let wait = Duration.milliseconds(Int64(query.waitMs == 0 ? 10_000 : min(query.waitMs, 600_000)))
            let take = try await takes.stop(takeID: query.takeID, at: at, wait: wait, by: caller)
            reply.takes = [try await info(take, detailed: false)]
            reply.status = .ok
        } catch let refusal as TakeRefusal {
            reply.status = .failure(refusal.code, refusal.message)
        } catch let already as TakeAlreadyStopped {
            // Not a failure (the take is stopped, as asked), but not this request's doing: an
            // OK with a reason, which `capfleet record stop` shows and exits 4 on.
            reply.takes = [try await info(already.take, detailed: false)]
            reply.status = .ok
            reply.status.reason = already.message
        }
    }

    func listRecordings(into reply: inout Capfleet_V1_OperatorReply) async throws {
        var infos: [Capfleet_V1_TakeInfo] = []
        for take in try await store.takes() { infos.append(try await info(take, detailed: false)) }
        reply.takes = infos
        reply.status = .ok
    }

    func showRecording(_ takeID: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        guard let take = try await store.take(id: takeID) else {
            reply.status = .failure(.notFound, "no take \(takeID); see capfleet recordings list")
            return
        }
        reply.takes = [try await info(take, detailed: true)]
        reply.status = .ok
    }

    func deleteRecording(_ takeID: String, by caller: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        guard let take = try await store.take(id: takeID) else {
            reply.status = .failure(.notFound, "no take \(takeID); see capfleet recordings list")
            return
        }
        guard take.state != .recording else {
            reply.status = .failure(.badRequest, "take \(takeID) is still recording: stop it first (capfleet record stop \(takeID))")
            return
        }
        // Parts on agents' disks: each reachable agent removes its own; the others keep theirs.
        var leftOnAgents: [String] = []
        if take.store == .agent {
            for device in try await store.takeDevices(takeID: takeID) {
                if !agentTakes.send(to: device.nodeId, takeID: takeID, deviceID: device.deviceId, .deletePart(Capfleet_V1_DeletePart())) {
                    leftOnAgents.append("\(device.deviceId) on node \(device.nodeId)")
                }
            }
        }
        try await store.deleteTake(
            id: takeID,
            audit: AuditEntry(
                at: clock.unixMilliseconds(), actor: caller, action: "recording.delete",
                target: takeID, outcome: "ok", detail: take.name))
        let directory = take.directory
        let leftover = await OwnedThread.run("cf-files") { () -> String? in
            do {
                try FileManager.default.removeItem(atPath: directory)
                return nil
            } catch let error as CocoaError where error.code == .fileNoSuchFile {
                return nil  // nothing was ever written, or someone removed it already
            } catch {
                return "\(error)"
            }
        }
        events.emit(.recording, message: "\(caller) deleted take \(takeID) (\(take.name))")
        guard let leftover else {
            reply.status = .ok
            if !leftOnAgents.isEmpty {
                reply.status.reason =
                    "take \(takeID) is deleted from the index; these parts stay on their nodes' disks, which were not reachable: \(leftOnAgents.joined(separator: ", ")). Remove them by hand from the agents' recordings_dir"
            }
            return
        }
        // The index no longer lists the take: the operator must hear that its files stay.
        logger.error(
            "a deleted take's files could not be removed", metadata: ["take.id": "\(takeID)", "path": "\(directory)", "error": "\(leftover)"])
        reply.status = .with {
            $0.code = .ok
            $0.reason =
                "take \(takeID) is deleted from the index, but its files in \(directory) could not be removed (\(leftover)); remove them by hand"
        }
    }

    /// One segment against the index, or (no device named) the take's accounting.
    func verifyRecording(_ query: Capfleet_V1_VerifyRecording, into reply: inout Capfleet_V1_OperatorReply) async throws {
        guard let take = try await store.take(id: query.takeID) else {
            reply.status = .failure(.notFound, "no take \(query.takeID); see capfleet recordings list")
            return
        }
        let segments = try await store.segments(takeID: take.id)
        var verification = Capfleet_V1_SegmentVerification()
        verification.deviceID = query.deviceID
        verification.segmentNumber = query.segmentNumber
        if query.deviceID.isEmpty {
            verification.problems = Self.accountingProblems(devices: try await store.takeDevices(takeID: take.id), segments: segments)
        } else {
            guard var segment = segments.first(where: { $0.deviceId == query.deviceID && $0.number == Int(query.segmentNumber) }) else {
                reply.status = .failure(
                    .notFound, "take \(take.id) has no segment \(query.segmentNumber) of \(query.deviceID); see capfleet recordings show \(take.id)")
                return
            }
            // A segment just finished is checksummed on the hasher's thread: give it a minute
            // (counted in polls, so that no clock reading decides when to stop).
            var polls = 0
            while segment.state != .open, segment.sha256.isEmpty, polls < 300 {
                polls += 1
                try await Task.sleep(for: .milliseconds(200))
                segment =
                    try await store.segments(takeID: take.id).first { $0.deviceId == segment.deviceId && $0.number == segment.number } ?? segment
            }
            let start = take.startFleetNs
            if let nodeID = segment.nodeId, segment.collectedPath == nil {
                // Only its agent holds it: the agent checks its file against the index.
                try await verifyOnAgent(segment, nodeID: nodeID, takeStart: start, into: &verification)
            } else {
                var readable = segment
                readable.path = segment.readablePath ?? segment.path
                let checked = readable
                let report = await OwnedThread.run("cf-files") { SegmentVerifier.verify(checked, takeStart: start) }
                verification.problems = report.problems
                verification.frames = UInt64(report.frames)
                verification.sizeBytes = UInt64(report.sizeBytes)
            }
        }
        verification.ok = verification.problems.isEmpty
        reply.verification = verification
        reply.status = .ok
    }

    private func verifyOnAgent(
        _ segment: SegmentRecord, nodeID: String, takeStart: UInt64,
        into verification: inout Capfleet_V1_SegmentVerification
    ) async throws {
        guard await control.isOnline(nodeID), agentTakes.isReachable(nodeID) else {
            verification.problems = [
                "segment \(segment.number) of \(segment.deviceId) is only on node \(nodeID), which is offline: it cannot be checked now (and is missing if the node is gone for good)"
            ]
            return
        }
        let request = Capfleet_V1_CheckSegment.with {
            $0.number = UInt32(segment.number)
            $0.sizeBytes = UInt64(max(segment.sizeBytes, 0))
            $0.sha256 = segment.sha256
            $0.frames = UInt64(max(segment.frames, 0))
            $0.firstFleetNs = segment.firstFleetNs ?? 0
            $0.lastFleetNs = segment.lastFleetNs ?? 0
            $0.firstSequence = segment.firstSequence ?? 0
            $0.lastSequence = segment.lastSequence ?? 0
            $0.takeStartFleetNs = takeStart
        }
        // Reading the file back on the agent: a second per few hundred MB, and more besides.
        let patience = Duration.seconds(30 + Int64(max(segment.sizeBytes, 0) >> 26))
        guard let answer = await agentTakes.check(nodeID: nodeID, takeID: segment.takeId, deviceID: segment.deviceId, request, timeout: patience)
        else {
            verification.problems = ["node \(nodeID) did not answer the check of segment \(segment.number) of \(segment.deviceId) within \(patience)"]
            return
        }
        verification.problems = answer.problems.map { "on node \(nodeID): \($0)" }
        verification.frames = answer.frames
        verification.sizeBytes = answer.sizeBytes
    }

    /// Starts copying a take's agent-held segments to the coordinator; answers at once.
    func collectRecording(_ takeID: String, by caller: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        guard let take = try await store.take(id: takeID) else {
            reply.status = .failure(.notFound, "no take \(takeID); see capfleet recordings list")
            return
        }
        guard take.store == .agent else {
            reply.status = .failure(.badRequest, "take \(takeID) was recorded on the coordinator: its segments are here already")
            return
        }
        let left = try await collections.collect(take, by: caller)
        reply.takes = [try await info(take, detailed: true)]
        reply.status = .ok
        reply.status.reason = left == 0 ? "every segment of take \(takeID) is on the coordinator" : "collecting \(left) segments"
    }

    /// Client-supplied timed metadata: into the index and the files.
    func noteRecording(_ query: Capfleet_V1_NoteRecording, by caller: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        // Anything but one JSON object is the client's mistake, answered as such.
        guard var fields = (try? JSONSerialization.jsonObject(with: Data(query.json.utf8))) as? [String: Any] else {
            reply.status = .failure(.badRequest, "the note must be one JSON object, e.g. {\"location\":\"stage 2\"}")
            return
        }
        if fields["kind"] == nil { fields["kind"] = "note" }
        fields["by"] = caller
        do {
            let noted = try await takes.note(
                takeID: query.takeID, deviceID: query.deviceID.isEmpty ? nil : query.deviceID, fields: fields,
                at: query.atFleetTimeNs == 0 ? nil : query.atFleetTimeNs)
            reply.status = .ok
            reply.takes = [try await info(noted, detailed: false)]
        } catch let refusal as TakeRefusal {
            reply.status = .failure(refusal.code, refusal.message)
        }
    }

    /// A chunk of a segment's file, for export.
    func readSegment(_ query: Capfleet_V1_ReadSegment, into reply: inout Capfleet_V1_OperatorReply) async throws {
        guard
            let segment = try await store.segments(takeID: query.takeID)
                .first(where: { $0.deviceId == query.deviceID && $0.number == Int(query.segmentNumber) })
        else {
            reply.status = .failure(.notFound, "take \(query.takeID) has no segment \(query.segmentNumber) of \(query.deviceID)")
            return
        }
        guard segment.state != .open else {
            reply.status = .failure(
                .unavailable, "segment \(segment.number) of \(segment.deviceId) is still being written; export it when the take has stopped")
            return
        }
        guard let path = segment.readablePath else {
            reply.status = .failure(
                .unavailable,
                "segment \(segment.number) of \(segment.deviceId) is on node \(segment.nodeId ?? "?")'s disk: collect it first (capfleet recordings collect \(segment.takeId))"
            )
            return
        }
        await Self.readChunk(of: path, offset: query.offset, length: query.length, into: &reply)
    }

    /// Up to `length` bytes (at most 1 MiB; 0 = 1 MiB) of a file from `offset`, read on a thread
    /// of its own, into the reply's segment_data with the whole file's size: exports of takes and stills.
    static func readChunk(of path: String, offset: UInt64, length wanted: UInt32, into reply: inout Capfleet_V1_OperatorReply) async {
        let length = Int(wanted == 0 ? 1 << 20 : min(wanted, 1 << 20))
        let read = await OwnedThread.run("cf-files") { () -> Result<(Data, UInt64), CocoaError> in
            guard let handle = FileHandle(forReadingAtPath: path) else { return .failure(CocoaError(.fileReadNoSuchFile)) }
            // Closing a file opened for reading cannot lose data.
            defer { try? handle.close() }
            do {
                let size = try handle.seekToEnd()
                try handle.seek(toOffset: min(offset, size))
                return .success((try handle.read(upToCount: length) ?? Data(), size))
            } catch {
                return .failure(CocoaError(.fileReadUnknown))
            }
        }
        switch read {
        case let .success((data, size)):
            reply.segmentData = data
            reply.segmentSize = size
            reply.status = .ok
        case let .failure(error):
            reply.status = .failure(.internal, "cannot read \(path): \(error.localizedDescription)")
        }
    }

    /// The index's own promises: every frame of a device accounted for, its segments adding
    /// up to its tally and following each other in sequence.
    static func accountingProblems(devices: [TakeDeviceRecord], segments: [SegmentRecord]) -> [String] {
        var problems: [String] = []
        for device in devices {
            let own = segments.filter { $0.deviceId == device.deviceId }.sorted { $0.number < $1.number }
            let segmentFrames = own.reduce(Int64(0)) { $0 + $1.frames }
            if segmentFrames != device.frames {
                problems.append("\(device.deviceId): its segments hold \(segmentFrames) frames, its tally says \(device.frames)")
            }
            if let first = device.firstSequence, let last = device.lastSequence {
                let span = last >= first ? last - first + 1 : 0
                let accounted = UInt64(max(device.frames, 0)) + device.drops.total
                if accounted != span {
                    problems.append(
                        "\(device.deviceId): frames \(first)…\(last) are \(span), but \(device.frames) stored and \(device.drops.total) dropped make \(accounted)"
                    )
                }
            } else if device.frames > 0 {
                problems.append("\(device.deviceId): \(device.frames) frames without a sequence range")
            }
            for (earlier, later) in zip(own, own.dropFirst()) {
                if let end = earlier.lastSequence, let start = later.firstSequence, start <= end {
                    problems.append(
                        "\(device.deviceId): segment \(later.number) starts at frame \(start), not after segment \(earlier.number)'s last, \(end)")
                }
            }
            for segment in own where segment.state == .open && device.state != .recording && device.state != .waiting && device.state != .interrupted
            {
                problems.append("\(device.deviceId): segment \(segment.number) is still open")
            }
        }
        return problems
    }

    func info(_ take: TakeRecord, detailed: Bool) async throws -> Capfleet_V1_TakeInfo {
        let devices = try await store.takeDevices(takeID: take.id)
        let segments = try await store.segments(takeID: take.id)
        var online: Set<String> = []
        for nodeID in Set(devices.map(\.nodeId)) where await control.isOnline(nodeID) { online.insert(nodeID) }
        var info = Self.wire(
            take, devices: devices, segments: segments, events: detailed ? try await store.takeEvents(takeID: take.id) : nil,
            onlineNodes: online)
        // A collect's progress moves with the bytes of the segments being copied, not only
        // with whole segments (which may be most of a short take).
        info.collectedBytes += min(collections.bytesArriving(takeID: take.id), info.agentHeldBytes)
        return info
    }

    static func wire(
        _ take: TakeRecord, devices: [TakeDeviceRecord], segments: [SegmentRecord], events: [TakeEventRecord]?,
        onlineNodes: Set<String> = []
    ) -> Capfleet_V1_TakeInfo {
        .with { info in
            info.store = take.store.rawValue
            info.collectError = take.collectError
            info.encoding = take.encoding.wire
            info.agentHeldBytes = segments.filter { $0.nodeId != nil && $0.collectedPath == nil }.reduce(0) { $0 + UInt64(max($1.sizeBytes, 0)) }
            info.collectedBytes = segments.filter { $0.nodeId != nil && $0.collectedPath != nil }.reduce(0) { $0 + UInt64(max($1.sizeBytes, 0)) }
            info.id = take.id
            info.name = take.name
            info.state = take.state.rawValue
            info.startFleetNs = take.startFleetNs
            info.stopFleetNs = take.stopFleetNs ?? 0
            info.directory = take.directory
            info.createdUnixMs = take.createdAt
            info.createdBy = take.createdBy
            info.error = take.error
            info.devices = devices.map { device in
                .with {
                    $0.deviceID = device.deviceId
                    $0.nodeID = device.nodeId
                    $0.state = device.state.rawValue
                    $0.pixelFormat = device.pixelFormat
                    $0.width = UInt32(clamping: device.width)
                    $0.height = UInt32(clamping: device.height)
                    $0.frameRate = device.frameRate
                    $0.firstFleetNs = device.firstFleetNs ?? 0
                    $0.lastFleetNs = device.lastFleetNs ?? 0
                    $0.firstSequence = device.firstSequence ?? 0
                    $0.lastSequence = device.lastSequence ?? 0
                    $0.frames = UInt64(max(device.frames, 0))
                    $0.bytes = UInt64(max(device.bytes, 0))
                    $0.drops = device.drops.wire
                    $0.segments = UInt32(segments.filter { $0.deviceId == device.deviceId }.count)
                    $0.endReason = device.endReason
                    $0.withheldFrames = UInt64(max(device.withheldFrames, 0))
                    $0.nodeOnline = onlineNodes.contains(device.nodeId)
                    $0.encoder = device.encoder
                    $0.sourcePixelFormat = device.sourcePixelFormat
                    $0.encoding = (device.ownEncoding ?? take.encoding).wire
                }
            }
            let firsts = devices.compactMap(\.firstFleetNs)
            if let earliest = firsts.min(), let latest = firsts.max() { info.startSpreadNs = latest - earliest }
            info.frames = devices.reduce(0) { $0 + UInt64(max($1.frames, 0)) }
            info.bytes = devices.reduce(0) { $0 + UInt64(max($1.bytes, 0)) }
            info.sizeBytes = segments.reduce(0) { $0 + UInt64(max($1.sizeBytes, 0)) }
            if let events {
                info.segments = segments.map { segment in
                    .with {
                        $0.deviceID = segment.deviceId
                        $0.number = UInt32(segment.number)
                        $0.path = segment.path
                        $0.state = segment.state.rawValue
                        $0.sizeBytes = UInt64(max(segment.sizeBytes, 0))
                        $0.sha256 = segment.sha256
                        $0.firstFleetNs = segment.firstFleetNs ?? 0
                        $0.lastFleetNs = segment.lastFleetNs ?? 0
                        $0.firstSequence = segment.firstSequence ?? 0
                        $0.lastSequence = segment.lastSequence ?? 0
                        $0.frames = UInt64(max(segment.frames, 0))
                        $0.nodeID = segment.nodeId ?? ""
                        $0.nodeOnline = segment.nodeId.map { onlineNodes.contains($0) } ?? true
                        $0.collectedPath = segment.collectedPath ?? ""
                        $0.drops = segment.drops.wire
                    }
                }
                info.events = events.map { event in
                    .with {
                        $0.deviceID = event.deviceId
                        $0.fleetNs = event.fleetNs
                        $0.kind = event.kind
                        $0.detail = event.detail
                    }
                }
            }
        }
    }
}
