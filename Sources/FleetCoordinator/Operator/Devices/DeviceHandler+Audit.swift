import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// Exposure audits (proto-docs/clock.md, "Auditing exposures"): every camera named decodes the
/// timecode it films for the same seconds, all at once; the figures are `ExposureAudit`'s, from
/// what they read. Takes no decision of its own across an await.
extension DeviceHandler {
    func syncAudit(_ query: Capfleet_V1_SyncAudit, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        guard !query.deviceIds.isEmpty, query.deviceIds.count <= SyncAuditLimits.maximumDevices else {
            reply.status = .failure(.badRequest, "name between 1 and \(SyncAuditLimits.maximumDevices) cameras to audit")
            return
        }
        guard Set(query.deviceIds).count == query.deviceIds.count else {
            reply.status = .failure(.badRequest, "name each camera once: a camera audits once at a time")
            return
        }
        var targets: [(deviceID: String, nodeID: String)] = []
        for deviceID in query.deviceIds {
            guard let device = try await store.existingDevice(deviceID, into: &reply) else { return }
            targets.append((device.id, device.nodeId))
        }
        let seconds = SyncAuditLimits.seconds(query.seconds)
        let milliseconds = UInt32(seconds * 1000)
        // The audit's length, then the agent's own time to answer.
        let wait = Duration.milliseconds(Int(milliseconds)) + .seconds(OperatorReplyTime.agentCommandSeconds)
        let agents = self.agents
        let start = clock.fleetNow()
        let answers = await withTaskGroup(of: ExposureAudit.Answer.self) { group in
            for target in targets {
                group.addTask {
                    let answer = await agents.command(
                        .auditExposures(.with { $0.durationMs = milliseconds }), deviceID: target.deviceID, nodeID: target.nodeID,
                        timeout: wait)
                    return ExposureAudit.Answer(
                        deviceID: target.deviceID, nodeID: target.nodeID, status: answer.status,
                        samples: answer.status.isOK && answer.hasExposureAudit ? answer.exposureAudit : nil)
                }
            }
            var answers: [ExposureAudit.Answer] = []
            for await answer in group { answers.append(answer) }
            return answers
        }
        let order = Dictionary(uniqueKeysWithValues: query.deviceIds.enumerated().map { ($0.element, $0.offset) })
        let result = ExposureAudit.result(
            of: answers.sorted { (order[$0.deviceID] ?? 0) < (order[$1.deviceID] ?? 0) }, truth: exposureTruth, start: start,
            end: clock.fleetNow())
        reply.syncAudit = result
        await takes.sync.audited(result)
        reply.status = ExposureAudit.status(of: result)
    }
}
