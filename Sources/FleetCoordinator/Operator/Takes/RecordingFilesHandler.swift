import FleetCore
import FleetProtocol
import FleetRecording
import FleetStore
import FleetSystem
import Foundation
import Logging

/// A take's files: deleted (here and on the agents that hold parts), verified against the
/// index, read in chunks for export. File work runs on threads of its own.
struct RecordingFilesHandler: Sendable {
    let store: FleetDatabase
    let agents: any AgentCommands
    /// Takes recorded on the agents: their parts are deleted and checked there.
    let agentLinks: AgentRecordLinks
    /// Proved copies on storage destinations: checked there when the host cannot be.
    let copies: DestinationCopies
    let events: FleetEvents
    let clock: CoordinatorClock
    let logger: Logger

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
                if !agentLinks.send(to: device.nodeId, takeID: takeID, deviceID: device.deviceId, .deletePart(Capfleet_V1_DeletePart())) {
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
                // Only its agent holds it: the agent checks its file against the index; if it
                // cannot, a proved copy on a storage destination is checked there.
                try await verifyOnAgent(segment, nodeID: nodeID, takeStart: start, into: &verification)
                if !verification.problems.isEmpty, let copy = try await copies.provedCopy(of: segment) {
                    let problems = await copies.check(copy, against: segment)
                    verification.problems =
                        problems.isEmpty ? [] : verification.problems + problems
                    if problems.isEmpty {
                        verification.sizeBytes = UInt64(max(segment.sizeBytes, 0))
                        verification.frames = UInt64(max(segment.frames, 0))
                    }
                }
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
        guard await agents.isOnline(nodeID), agentLinks.isReachable(nodeID) else {
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
        guard let answer = await agentLinks.check(nodeID: nodeID, takeID: segment.takeId, deviceID: segment.deviceId, request, timeout: patience)
        else {
            verification.problems = ["node \(nodeID) did not answer the check of segment \(segment.number) of \(segment.deviceId) within \(patience)"]
            return
        }
        verification.problems = answer.problems.map { "on node \(nodeID): \($0)" }
        verification.frames = answer.frames
        verification.sizeBytes = answer.sizeBytes
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
        await FileChunk.read(of: path, offset: query.offset, length: query.length, into: &reply)
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
}
