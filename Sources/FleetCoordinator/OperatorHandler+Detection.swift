import FleetCore
import FleetProtocol
import FleetStore

/// `capfleet detect` (detection.md): what a device's agent looks for, under the device's lease,
/// pushed to the agent, remembered once it took it (pushed again at every registration), audited.
extension OperatorHandler {
    func changeDetection(
        _ query: Capfleet_V1_ChangeDetection, operator who: String, into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        let settings: DetectionSettings
        do {
            settings = try DetectionSettings(wire: query.settings)
        } catch {
            reply.status = .failure(.badRequest, error.description)
            return
        }
        guard let device = try await existingDevice(query.deviceID, into: &reply) else { return }
        try await underLease(device, who, "device.detection", into: &reply) { reply throws(StoreError) in
            let detail =
                settings.isOn
                ? "codes \(settings.codes.isEmpty ? "none" : settings.codes.map(\.rawValue).joined(separator: ",")), faces \(settings.faces ? "on" : "off"), "
                    + "region \(settings.region.x),\(settings.region.y),\(settings.region.width),\(settings.region.height), \(settings.framesPerSecond) fps"
                : "off"
            // A slow host answers once its agent made its barcode scanner: more than the 3 s of a control change.
            let answer = await control.command(
                .setDetection(.with { $0.settings = settings.wire }), deviceID: device.id, nodeID: device.nodeId,
                timeout: .seconds(10))
            guard answer.status.isOK else {
                try await audit(who, "device.detection", device.id, outcome: "failed", detail: "\(detail): \(answer.status.reason)")
                reply.status = answer.status
                return
            }
            let now = clock.unixMilliseconds()
            try await store.saveDetection(
                DetectionSettingsRecord(deviceId: device.id, settings: settings, changedAt: now, changedBy: holder(who)),
                audit: AuditEntry(at: now, actor: holder(who), action: "device.detection", target: device.id, outcome: "ok", detail: detail))
            reply.detection = settings.wire
            reply.status = .ok
        }
    }
}
