import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// Policies an agent applies on its own: drop recovery and the pressure cap. Stored first, so
/// that they hold even while the node is offline and are pushed when it registers.
extension DeviceHandler {
    func setDropRecovery(
        _ query: Capfleet_V1_SetDropRecoveryPolicy, by who: String,
        into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        guard let device = try await store.existingDevice(query.deviceID, into: &reply) else { return }
        try await underLease(device, who, "device.policy", into: &reply) { reply throws(StoreError) in
            try await setDropRecovery(query, on: device, by: who, into: &reply)
        }
    }

    private func setDropRecovery(
        _ query: Capfleet_V1_SetDropRecoveryPolicy, on device: DeviceRecord, by who: String, into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        let policy = DropRecoveryPolicy(wire: query.policy)
        guard (0..<1).contains(policy.lateDropShare), policy.minimumFramesPerSecond > 0, policy.minimumFramesPerSecond.isFinite else {
            reply.status = .failure(.badRequest, "a late-drop share is between 0 and 1, and the minimum rate above 0")
            return
        }
        let detail =
            policy.isEnabled
            ? "drop recovery on: down to \(VideoFormat.trim(policy.minimumFramesPerSecond)) fps while late drops exceed \(Int(policy.lateDropShare * 100))% of frames; restore after \(policy.quietIntervalsToRestore) s without"
            : "drop recovery off"
        let now = clock.unixMilliseconds()
        // Stored first: the policy holds even if the node is offline now, and is pushed when it registers.
        try await store.saveDropRecoveryPolicy(
            DropRecoveryPolicyRecord(
                deviceId: device.id, enabled: policy.isEnabled, minimumFps: policy.minimumFramesPerSecond,
                lateDropShare: policy.lateDropShare, quietSeconds: policy.quietIntervalsToRestore,
                updatedAt: now),
            audit: AuditEntry(at: now, actor: OperatorCaller.holder(who), action: "device.policy", target: device.id, outcome: "ok", detail: detail))
        guard await agents.isOnline(device.nodeId) else {
            try await listing.listDevices(nodeID: device.nodeId, only: device.id, into: &reply)
            reply.status = .with {
                $0.code = .ok; $0.reason = "stored; node \(device.nodeId) is offline and gets the policy when it registers"
            }
            return
        }
        let answer = await agents.command(.setDropRecovery(.with { $0.policy = policy.wire }), on: device)
        try await record(answer, on: device, action: "device.policy.push", who: who, detail: detail, into: &reply)
    }

    func changePressurePolicy(
        _ query: Capfleet_V1_ChangePressurePolicy, by who: String,
        into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        guard let device = try await store.existingDevice(query.deviceID, into: &reply) else { return }
        try await underLease(device, who, "device.policy", into: &reply) { reply throws(StoreError) in
            try await changePressurePolicy(query, on: device, by: who, into: &reply)
        }
    }

    private func changePressurePolicy(
        _ query: Capfleet_V1_ChangePressurePolicy, on device: DeviceRecord, by who: String, into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        let policy = PressurePolicy(wire: query.policy)
        guard policy.frameRate.isFinite else {
            reply.status = .failure(.badRequest, "a pressure policy's frame rate is a finite number of frames per second")
            return
        }
        if policy.isEnabled {
            guard query.policy.level != .unspecified, policy.level > .nominal else {
                reply.status = .failure(.badRequest, "a pressure policy acts at fair, serious, critical or shutdown")
                return
            }
            guard query.policy.frameRate > 0 else {
                reply.status = .failure(.badRequest, "a pressure policy needs the frame rate to hold the device to (above 0)")
                return
            }
            let formats = try await store.formats(deviceID: device.id)
            if formats.indices.contains(device.activeFormatPosition) {
                let slowest = formats[device.activeFormatPosition].frameRateRanges.map(\.minFramesPerSecond).min() ?? 0
                guard slowest <= policy.frameRate + 1e-9 else {
                    reply.status = .failure(
                        .unsupported,
                        "device \(device.id): its active format runs no slower than \(VideoFormat.trim(slowest)) fps, above the cap of \(VideoFormat.trim(policy.frameRate)) fps"
                    )
                    return
                }
            }
        }
        let detail = "pressure policy " + policy.summary
        let now = clock.unixMilliseconds()
        try await store.savePressurePolicy(
            // A policy turned off keeps a storable level whatever the request said.
            PressurePolicyRecord(
                deviceId: device.id, enabled: policy.isEnabled, level: max(policy.level.rawValue, PressureLevel.fair.rawValue),
                frameRate: policy.frameRate, updatedAt: now),
            audit: AuditEntry(at: now, actor: OperatorCaller.holder(who), action: "device.policy", target: device.id, outcome: "ok", detail: detail))
        guard await agents.isOnline(device.nodeId) else {
            try await listing.listDevices(nodeID: device.nodeId, only: device.id, into: &reply)
            reply.status = .with {
                $0.code = .ok; $0.reason = "stored; node \(device.nodeId) is offline and gets the policy when it registers"
            }
            return
        }
        let answer = await agents.command(.setPressurePolicy(.with { $0.policy = policy.wire() }), on: device)
        try await record(answer, on: device, action: "device.policy.push", who: who, detail: detail, into: &reply)
    }
}
