import FleetCore
import FleetProtocol
import FleetStore

/// `capfleet optics` (detection.md, "Scan set-up"): what is known of a device's lens that its
/// driver does not say. It changes nothing on the camera, so it needs no lease; audited.
extension OperatorHandler {
    func setDeviceOptics(_ query: Capfleet_V1_SetDeviceOptics, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        let optics = DeviceOptics(wire: query.optics)
        if let problem = optics.problem {
            reply.status = .failure(.badRequest, problem)
            return
        }
        guard let device = try await existingDevice(query.deviceID, into: &reply) else { return }
        let now = clock.unixMilliseconds()
        let record = DeviceOpticsRecord(deviceId: device.id, optics: optics, changedAt: now, changedBy: holder(who))
        try await store.saveOptics(
            record,
            audit: AuditEntry(
                at: now, actor: holder(who), action: "device.optics", target: device.id,
                outcome: "ok", detail: optics.summary))
        reply.optics = record.wire
        reply.status = .ok
    }
}

extension DeviceOpticsRecord {
    var wire: Capfleet_V1_DeviceOptics {
        var wire = optics.wire
        wire.changedBy = changedBy
        wire.changedUnixMs = changedAt
        return wire
    }
}
