import FleetCore
import FleetProtocol
import FleetStore

/// `capfleet region` (commands.md, "Region of interest"): moves the window of a GenICam
/// camera's sensor that its active format reads, under the lease, audited. Cameras that
/// describe no sensor bounds (`crop` in their descriptor) have none to move; the agent checks
/// the window against the camera's steps and answers with it as placed.
extension DeviceHandler {
    func changeRegion(_ query: Capfleet_V1_ChangeRegion, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        guard let device = try await store.existingDevice(query.deviceID, into: &reply) else { return }
        guard SourceKind(rawValue: device.kind) == .genicam else {
            reply.status = .failure(
                .badRequest,
                "\(device.id) is a \(device.kind) device: a region of interest is a GenICam camera's (a V4L2 camera crops through zoom: capfleet zoom)"
            )
            return
        }
        if !query.centred, query.left < 0 || query.top < 0 {
            reply.status = .failure(.badRequest, "a window's corner is at 0,0 or right of and below it, not \(query.left),\(query.top)")
            return
        }
        try await underLease(device, who, "device.region", into: &reply) { reply throws(StoreError) in
            let detail = query.centred ? "centred" : "at \(query.left),\(query.top)"
            let answer = await agents.command(
                .setRegion(
                    .with {
                        $0.centred = query.centred; $0.left = query.left; $0.top = query.top
                    }), on: device)
            guard answer.status.isOK else {
                try await audit(who, "device.region", device.id, outcome: "failed", detail: "\(detail): \(answer.status.reason)")
                reply.status = answer.status
                return
            }
            let placed = answer.region
            try await audit(
                who, "device.region", device.id, outcome: "ok", detail: "\(detail): \(placed.width)x\(placed.height) at \(placed.left),\(placed.top)")
            reply.region = placed
            reply.status = .ok
        }
    }
}
