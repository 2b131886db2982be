import FleetCore
import FleetProtocol
import FleetStore

/// `capfleet preroll` (recordings.md, "Pre-roll"): how much of a camera's or microphone's recent past its agent
/// keeps for takes that start before they were asked for, under its lease, pushed to its
/// agent, remembered once the agent took it (pushed again at every registration), audited.
extension DeviceHandler {
    func changePreRoll(_ query: Capfleet_V1_ChangePreRoll, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        let settings = PreRollSettings(
            wire: .with {
                $0.milliseconds = query.milliseconds
                $0.budgetBytes = query.budgetBytes
            })
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
        try await underLease(device, who, "device.pre_roll", into: &reply) { reply throws(StoreError) in
            let detail = settings.isOn ? "\(settings.seconds) s within \(settings.budgetBytes >> 20) MiB" : "off"
            let answer = await agents.command(
                .setPreRoll(
                    .with {
                        $0.milliseconds = settings.wire.milliseconds
                        $0.budgetBytes = settings.wire.budgetBytes
                    }), on: device)
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
