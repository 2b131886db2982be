import FleetCore
import FleetProtocol
import FleetStore

/// `capfleet processing` (microphones.md, "Processing"): a microphone's high-pass, noise
/// suppression and gain, under its lease, pushed to its agent, remembered once the agent took
/// them (pushed again at every registration), audited.
extension DeviceHandler {
    func changeAudioProcessing(
        _ query: Capfleet_V1_ChangeAudioProcessing, by who: String, into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        let settings = AudioProcessingSettings(wire: query.processing)
        if let problem = settings.problem() {
            reply.status = .failure(.badRequest, problem)
            return
        }
        guard let device = try await store.existingDevice(query.deviceID, into: &reply) else { return }
        guard SourceKind(rawValue: device.kind)?.isMicrophone == true else {
            reply.status = .failure(.badRequest, "\(device.id) is not a microphone: processing is for microphones (capfleet devices lists them)")
            return
        }
        try await underLease(device, who, "device.audio_processing", into: &reply) { reply throws(StoreError) in
            let detail = settings.summary
            let answer = await agents.command(.setAudioProcessing(.with { $0.processing = settings.wire }), on: device)
            guard answer.status.isOK else {
                try await audit(who, "device.audio_processing", device.id, outcome: "failed", detail: "\(detail): \(answer.status.reason)")
                reply.status = answer.status
                return
            }
            let now = clock.unixMilliseconds()
            try await store.saveAudioProcessing(
                AudioProcessingRecord(deviceId: device.id, settings: settings, changedAt: now, changedBy: OperatorCaller.holder(who)),
                audit: AuditEntry(
                    at: now, actor: OperatorCaller.holder(who), action: "device.audio_processing", target: device.id, outcome: "ok", detail: detail))
            reply.audioProcessing = settings.wire
            reply.status = .ok
        }
    }
}
