import FleetCore
import FleetProtocol
import FleetStore

/// `capfleet preroll` (recordings.md, "Pre-roll"): how much of a camera's or microphone's recent past its agent
/// keeps for takes that start before they were asked for, under its lease, pushed to its
/// agent, remembered once the agent took it (pushed again at every registration), audited.
extension DeviceHandler {
    func changePreRoll(_ query: Capfleet_V1_ChangePreRoll, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        let settings = PreRollSettings(change: query)
        if query.hasEncoding, query.encoding.codec != .unspecified, TakeEncoding(wire: query.encoding) == nil {
            reply.status = .failure(.badRequest, "the pre-roll's codec is one this coordinator does not know: ffv1, h264 or hevc")
            return
        }
        if let problem = settings.refusal {
            reply.status = .failure(.badRequest, problem)
            return
        }
        guard let device = try await store.existingDevice(query.deviceID, into: &reply) else { return }
        let kind = SourceKind(rawValue: device.kind)
        guard kind?.isCamera ?? true || kind?.isMicrophone == true else {
            reply.status = .failure(.badRequest, "\(device.id) is a \(device.kind) device: pre-roll is kept for cameras and microphones")
            return
        }
        if kind?.isMicrophone == true, settings.encoding != nil {
            reply.status = .failure(
                .badRequest, "\(device.id) is a microphone: its pre-roll is kept as FLAC, as its takes record it; --codec is for cameras")
            return
        }
        try await underLease(device, who, "device.pre_roll", into: &reply) { reply throws(StoreError) in
            let detail =
                settings.isOn
                ? "\(settings.seconds) s within \(settings.budgetBytes >> 20) MiB" + (settings.encoding.map { ", encoded as \($0.summary)" } ?? "")
                    + (settings.diskBudgetBytes > 0 ? ", \(settings.diskBudgetBytes >> 20) MiB on disk" : "")
                : "off"
            let answer = await agents.command(.setPreRoll(settings.command), on: device)
            guard answer.status.isOK else {
                try await audit(who, "device.pre_roll", device.id, outcome: "failed", detail: "\(detail): \(answer.status.reason)")
                reply.status = answer.status
                return
            }
            let now = clock.unixMilliseconds()
            try await store.savePreRoll(
                PreRollRecord(deviceId: device.id, settings: settings, changedAt: now, changedBy: OperatorCaller.holder(who)),
                audit: AuditEntry(
                    at: now, actor: OperatorCaller.holder(who), action: "device.pre_roll", target: device.id, outcome: "ok", detail: detail))
            reply.preRoll = answer.hasPreRoll ? answer.preRoll : settings.wire
            reply.status = .ok
        }
    }
}
