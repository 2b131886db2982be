import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// Time across devices: which frame each device captured at one fleet time, and frames
/// aligned to one fleet-time grid.
extension DeviceHandler {
    /// Each device's first frame captured at or after a fleet time, asked of every agent at
    /// once; the reply comes when the last has answered or given up (proto-docs/clock.md).
    func syncCheck(_ query: Capfleet_V1_SyncCheck, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        guard !query.deviceIds.isEmpty else {
            reply.status = .failure(.badRequest, "name the devices to compare")
            return
        }
        guard query.deviceIds.count <= 64 else {
            reply.status = .failure(.badRequest, "at most 64 devices at once")
            return
        }
        var targets: [(deviceID: String, nodeID: String)] = []
        for deviceID in query.deviceIds {
            guard let device = try await store.existingDevice(deviceID, into: &reply) else { return }
            targets.append((device.id, device.nodeId))
        }
        let now = clock.fleetNow()
        let at =
            query.atFleetTimeNs != 0
            ? query.atFleetTimeNs
            : now &+ (query.fromNowNs == 0 ? 1_000_000_000 : min(query.fromNowNs, 60_000_000_000))
        guard at >= now - 10_000_000_000, at <= now + 60_000_000_000 else {
            reply.status = .failure(.badRequest, "the time to check must lie between 10 s ago and 60 s from now in fleet time (now \(now))")
            return
        }
        let patienceMilliseconds: UInt32 = 2000
        let wait = Duration.nanoseconds(Int64(at > now ? at - now : 0)) + .milliseconds(Int(patienceMilliseconds) + 1000)
        let agents = self.agents
        let entries = await withTaskGroup(of: Capfleet_V1_SyncCheckResult.Entry.self) { group in
            for target in targets {
                group.addTask {
                    let answer = await agents.command(
                        .findFirstFrame(
                            .with {
                                $0.fleetTimeNs = at
                                $0.timeoutMs = patienceMilliseconds
                            }), deviceID: target.deviceID, nodeID: target.nodeID, timeout: wait)
                    return .with {
                        $0.deviceID = target.deviceID
                        $0.nodeID = target.nodeID
                        $0.status = answer.status
                        if answer.status.isOK, answer.hasFrameTiming { $0.frame = answer.frameTiming }
                    }
                }
            }
            var entries: [Capfleet_V1_SyncCheckResult.Entry] = []
            for await entry in group { entries.append(entry) }
            return entries
        }
        let order = Dictionary(uniqueKeysWithValues: query.deviceIds.enumerated().map { ($0.element, $0.offset) })
        let answered = entries.filter { $0.hasFrame }.map(\.frame)
        reply.syncCheck = .with {
            $0.atFleetTimeNs = at
            $0.entries = entries.sorted { (order[$0.deviceID] ?? 0) < (order[$1.deviceID] ?? 0) }
            if let first = answered.map(\.fleetTimeNs).min(), let last = answered.map(\.fleetTimeNs).max() { $0.spreadNs = last - first }
            $0.uncertaintyNs = answered.map(\.uncertaintyNs).max() ?? 0
        }
        reply.status =
            answered.count == entries.count
            ? .ok
            : .with {
                $0.code = .ok; $0.reason = "\(entries.count - answered.count) of \(entries.count) devices did not answer"
            }
    }

    func changeFrameAlignment(
        _ query: Capfleet_V1_ChangeFrameAlignment, by who: String,
        into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        guard !query.deviceIds.isEmpty, query.deviceIds.count <= 64 else {
            reply.status = .failure(.badRequest, "name between 1 and 64 devices")
            return
        }
        let wiring: (String) -> LineWiring
        switch LineWiring.plan(query) {
        case let .failure(problem):
            reply.status = .failure(.badRequest, problem.message)
            return
        case let .success(plan):
            wiring = plan
        }
        var refusals: [String] = []
        for deviceID in query.deviceIds {
            guard let device = try await store.existingDevice(deviceID, into: &reply) else { return }
            let allowed = try await underLease(device, who, "device.frame_alignment", into: &reply) { _ throws(StoreError) in
                if let refusal = try await alignFrames(of: device, enabled: query.enabled, wiring: wiring(deviceID), by: who) {
                    refusals.append(refusal)
                }
            }
            guard allowed else { return }
        }
        reply.status =
            refusals.isEmpty
            ? .ok
            : .with {
                $0.code = .ok
                $0.reason = refusals.joined(separator: "; ")
            }
    }

    /// One device's alignment, under its lease; the agent's refusal, if it refused.
    private func alignFrames(of device: DeviceRecord, enabled: Bool, wiring: LineWiring, by who: String) async throws(StoreError) -> String? {
        // Every device gets the same grid for as long as this coordinator runs.
        let origin = alignmentGridOrigin
        let wiring = enabled ? wiring : LineWiring()
        let answer = await agents.command(
            .setFrameAlignment(
                .with {
                    $0.enabled = enabled
                    $0.gridOriginFleetNs = origin
                    $0.triggerLine = wiring.triggerLine
                    $0.lineSourceDeviceID = wiring.sourceDeviceID
                    $0.outputLine = wiring.outputLine
                }), on: device)
        let detail = (enabled ? "aligned to the fleet-time grid from \(origin)" : "frame alignment off") + wiring.summary
        guard answer.status.isOK else {
            try await audit(who, "device.frame_alignment", device.id, outcome: "failed", detail: "\(detail): \(answer.status.reason)")
            return "\(device.id): \(answer.status.reason)"
        }
        // Remembered once the agent took it: pushed again whenever the node registers.
        let now = clock.unixMilliseconds()
        try await store.saveFrameAlignment(
            FrameAlignmentRecord(
                deviceId: device.id, enabled: enabled, changedAt: now, changedBy: OperatorCaller.holder(who), triggerLine: wiring.triggerLine,
                lineSourceDeviceId: wiring.sourceDeviceID, outputLine: wiring.outputLine),
            audit: AuditEntry(
                at: now, actor: OperatorCaller.holder(who), action: "device.frame_alignment", target: device.id, outcome: "ok", detail: detail))
        return nil
    }
}
