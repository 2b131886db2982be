import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// Takes recorded on the agents: what their recordings links report goes into the index here,
/// and the book hears when a part has ended. Every answer is sent only after the index holds
/// what it acknowledges; an agent that hears nothing sends again, and the writes are idempotent.
extension TakeDirector {
    /// Takes each report in turn until the stream ends (the coordinator stops).
    func follow(_ reports: AsyncStream<AgentTakeReport>) async {
        for await report in reports { await agentReported(report) }
    }

    func agentReported(_ report: AgentTakeReport) async {
        let part = TakeBook.Part(takeID: report.takeID, deviceID: report.deviceID)
        let take: TakeRecord?
        let device: TakeDeviceRecord?
        do {
            take = try await store.take(id: report.takeID)
            device = try await store.takeDevice(takeID: report.takeID, deviceID: report.deviceID)
        } catch {
            // Unanswered, the agent reports again.
            logger.error("cannot read the index for an agent's report", metadata: ["take.id": "\(part.takeID)", "error": "\(error)"])
            return
        }
        guard let take, take.store == .agent, let device, device.nodeId == report.nodeID else {
            answer(report, .refused(.failure(.notFound, "take \(report.takeID) has no part of \(report.deviceID) recorded on node \(report.nodeID)")))
            return
        }
        switch report.body {
        case let .segment(segment):
            await index(segment, of: part, nodeID: report.nodeID, take: take, report: report)
        case let .partEnded(end):
            await ended(end, of: part, device: device, report: report)
        }
    }

    private func index(_ segment: Capfleet_V1_AgentSegment, of part: TakeBook.Part, nodeID: String, take: TakeRecord, report: AgentTakeReport) async {
        var record = SegmentRecord(
            takeId: part.takeID, deviceId: part.deviceID, number: Int(segment.number), path: segment.path,
            openedAt: clock.unixMilliseconds())
        record.state = segment.state == "repaired" ? .repaired : .finished
        record.sizeBytes = Int64(clamping: segment.sizeBytes)
        record.sha256 = segment.sha256
        record.frames = Int64(clamping: segment.frames)
        record.firstFleetNs = segment.frames == 0 ? nil : segment.firstFleetNs
        record.lastFleetNs = segment.frames == 0 ? nil : segment.lastFleetNs
        record.firstSequence = segment.frames == 0 ? nil : segment.firstSequence
        record.lastSequence = segment.frames == 0 ? nil : segment.lastSequence
        record.closedAt = clock.unixMilliseconds()
        record.nodeId = nodeID
        record.setDrops(DropTally(wire: segment.drops))
        do {
            try await store.indexAgentSegment(record, tally: Self.tally(segment.part))
        } catch {
            logger.error(
                "cannot index an agent's segment", metadata: ["take.id": "\(part.takeID)", "device.id": "\(part.deviceID)", "error": "\(error)"])
            events.emit(
                .recording, nodeID: nodeID, deviceID: part.deviceID,
                message:
                    "take \(part.takeID): the recordings index could not record segment \(segment.number) of \(part.deviceID) (its agent keeps it and reports it again): \(error)"
            )
            return
        }
        answer(report, .indexed(.with { $0.number = segment.number }))
    }

    private func ended(_ end: Capfleet_V1_AgentPartEnd, of part: TakeBook.Part, device: TakeDeviceRecord, report: AgentTakeReport) async {
        if device.state == .stopped || device.state == .failed {
            answer(report, .done(Capfleet_V1_RecordDone()))
            return
        }
        do {
            let numbers = try await store.segmentNumbers(takeID: part.takeID, deviceID: part.deviceID)
            guard (numbers.max() ?? 0) == Int(end.segments) else {
                logger.warning(
                    "an agent ended a part before the index holds its segments; waiting for them",
                    metadata: [
                        "take.id": "\(part.takeID)", "device.id": "\(part.deviceID)", "indexed": "\(numbers.count)", "segments": "\(end.segments)",
                    ])
                return
            }
            if end.hasPart { try await store.setTakeDeviceTally(takeID: part.takeID, deviceID: part.deviceID, tally: Self.tally(end.part)) }
        } catch {
            logger.error(
                "cannot index the end of an agent's part",
                metadata: ["take.id": "\(part.takeID)", "device.id": "\(part.deviceID)", "error": "\(error)"])
            return
        }
        let reason = end.reason.isEmpty ? "stopped" : end.reason
        if book.isOpen(part) {
            await perform(
                book.report(end.failed ? .failed(reason) : .ended(reason: reason, withheldFrames: 0), from: part, nowFleetNs: clock.fleetNow()))
        } else {
            // A part the book no longer follows (its take failed): the index still hears how it ended.
            do {
                try await store.modifyTakeDevice(takeID: part.takeID, deviceID: part.deviceID) {
                    $0.state = end.failed ? .failed : .stopped
                    $0.endReason = reason
                }
            } catch {
                logger.error("cannot index the end of an agent's part", metadata: ["take.id": "\(part.takeID)", "error": "\(error)"])
                return
            }
        }
        answer(report, .done(Capfleet_V1_RecordDone()))
    }

    private func answer(_ report: AgentTakeReport, _ body: Capfleet_V1_RecordDown.OneOf_Body) {
        links.sendToConnection(
            report.routingID,
            .with {
                $0.takeID = report.takeID
                $0.deviceID = report.deviceID
                $0.body = body
            })
    }

    static func tally(_ wire: Capfleet_V1_PartTally) -> TakeDeviceTally {
        let any = wire.frames > 0
        return TakeDeviceTally(
            pixelFormat: wire.pixelFormat, width: Int(wire.width), height: Int(wire.height), frameRate: wire.frameRate,
            firstFleetNs: any ? wire.firstFleetNs : nil, lastFleetNs: any ? wire.lastFleetNs : nil,
            firstSequence: any ? wire.firstSequence : nil, lastSequence: any ? wire.lastSequence : nil,
            frames: Int64(clamping: wire.frames), bytes: Int64(clamping: wire.bytes), drops: DropTally(wire: wire.drops),
            encoder: wire.encoder, sourcePixelFormat: wire.sourcePixelFormat, bitDepth: wire.bitDepth == 0 ? 8 : Int(wire.bitDepth),
            colour: wire.hasColour ? ColourDescription(wire: wire.colour) : nil,
            depthUnitMetres: wire.depthUnitMetres > 0 && wire.depthUnitMetres.isFinite ? wire.depthUnitMetres : nil)
    }
}
