import FleetCore
import FleetProtocol
import FleetStore

/// `capfleet detect` (detection.md): what a device's agent looks for, under the device's lease,
/// pushed to the agent, remembered once it took it (pushed again at every registration), audited.
extension DeviceHandler {
    func changeDetection(
        _ query: Capfleet_V1_ChangeDetection, by who: String, into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        let settings: DetectionSettings
        do {
            settings = try DetectionSettings(wire: query.settings)
        } catch {
            reply.status = .failure(.badRequest, error.description)
            return
        }
        let policy = takes.configuration.framingPolicy
        if let refusal = policy.refusal(of: settings) {
            reply.status = .failure(.permissionDenied, refusal)
            return
        }
        guard let device = try await store.existingDevice(query.deviceID, into: &reply) else { return }
        // What the agent is told: the operator's settings, with framing as the fleet's control says.
        let pushed = policy.effective(settings) ?? .off
        try await underLease(device, who, "device.detection", into: &reply) { reply throws(StoreError) in
            let framing = pushed.framing.map { ", framing \($0.stored)\(settings.framing == nil ? " (the fleet's policy)" : "")" } ?? ""
            let detail =
                pushed.isOn
                ? "codes \(settings.codes.isEmpty ? "none" : settings.codes.map(\.rawValue).joined(separator: ",")), faces \(pushed.faces ? "on" : "off"), "
                    + "region \(settings.region.x),\(settings.region.y),\(settings.region.width),\(settings.region.height), \(settings.framesPerSecond) fps"
                    + framing
                : "off"
            // A slow host answers once its agent made its barcode scanner: more than the 3 s of a control change.
            let answer = await agents.command(
                .setDetection(.with { $0.settings = pushed.wire }), on: device,
                timeout: .seconds(10))
            guard answer.status.isOK else {
                try await audit(who, "device.detection", device.id, outcome: "failed", detail: "\(detail): \(answer.status.reason)")
                reply.status = answer.status
                return
            }
            let now = clock.unixMilliseconds()
            try await store.saveDetection(
                DetectionSettingsRecord(deviceId: device.id, settings: settings, changedAt: now, changedBy: OperatorCaller.holder(who)),
                audit: AuditEntry(
                    at: now, actor: OperatorCaller.holder(who), action: "device.detection", target: device.id, outcome: "ok", detail: detail))
            reply.detection = pushed.wire
            reply.status = .ok
        }
    }

    /// `capfleet optics` (detection.md, "Scan set-up"): what is known of a device's lens that its
    /// driver does not say. It changes nothing on the camera, so it needs no lease; audited.
    func setDeviceOptics(_ query: Capfleet_V1_SetDeviceOptics, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        let optics = DeviceOptics(wire: query.optics)
        if let problem = optics.problem {
            reply.status = .failure(.badRequest, problem)
            return
        }
        guard let device = try await store.existingDevice(query.deviceID, into: &reply) else { return }
        let now = clock.unixMilliseconds()
        let record = DeviceOpticsRecord(deviceId: device.id, optics: optics, changedAt: now, changedBy: OperatorCaller.holder(who))
        try await store.saveOptics(
            record,
            audit: AuditEntry(
                at: now, actor: OperatorCaller.holder(who), action: "device.optics", target: device.id,
                outcome: "ok", detail: optics.summary))
        reply.optics = record.wire
        reply.status = .ok
    }
}
