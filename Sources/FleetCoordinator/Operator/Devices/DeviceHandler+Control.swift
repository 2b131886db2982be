import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// `capfleet control` (commands.md, "Controls"): one of a camera's controls, checked against
/// what its agent last described, set under the lease, audited; the stored description then
/// holds the value the agent read back, so `capfleet device` shows it.
extension DeviceHandler {
    func changeControl(_ query: Capfleet_V1_ChangeControl, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        guard let device = try await store.existingDevice(query.deviceID, into: &reply) else { return }
        guard SourceKind(rawValue: device.kind)?.isCamera ?? true else {
            reply.status = .failure(.badRequest, "\(device.id) is not a camera: controls are cameras' (capfleet device lists a camera's)")
            return
        }
        guard var descriptor = try await storedDescriptor(of: device.id) else {
            reply.status = .failure(.unavailable, "\(device.id) has not described itself yet: its agent has not registered it")
            return
        }
        guard let index = descriptor.controls.firstIndex(where: { $0.id == query.controlID }) else {
            let known = descriptor.controls.map { "\(DeviceControl(wire: $0).key) (\(DeviceControl.hexadecimal($0.id)))" }
            reply.status = .failure(
                .badRequest,
                "\(device.id) has no control \(DeviceControl.hexadecimal(query.controlID)); it has \(known.isEmpty ? "none" : known.joined(separator: ", "))"
            )
            return
        }
        let control = DeviceControl(wire: descriptor.controls[index])
        if let problem = control.refusal(of: query.value) {
            reply.status = .failure(.badRequest, "\(device.id): \(problem)")
            return
        }
        try await underLease(device, who, "device.control", into: &reply) { reply throws(StoreError) in
            let detail = "\(control.key) = \(query.value)"
            let answer = await agents.command(
                .setControl(
                    .with {
                        $0.controlID = query.controlID; $0.value = query.value
                    }), on: device)
            guard answer.status.isOK else {
                try await audit(who, "device.control", device.id, outcome: "failed", detail: "\(detail): \(answer.status.reason)")
                reply.status = answer.status
                return
            }
            descriptor.controls[index] = answer.control
            let bytes: Data
            do {
                bytes = Data(try descriptor.serializedBytes() as [UInt8])
            } catch {
                throw StoreError.refused(reason: "device \(device.id)'s descriptor cannot be encoded: \(error)")
            }
            try await store.saveDescriptor(deviceID: device.id, bytes: bytes)
            try await audit(
                who, "device.control", device.id, outcome: "ok",
                detail: "\(detail) (read back \(answer.control.hasValue_p ? String(answer.control.value) : "none"))")
            reply.control = answer.control
            reply.status = .ok
        }
    }

    private func storedDescriptor(of deviceID: String) async throws(StoreError) -> Capfleet_V1_DeviceDescriptor? {
        guard let bytes = try await store.descriptor(deviceID: deviceID) else { return nil }
        do {
            return try Capfleet_V1_DeviceDescriptor(serializedBytes: bytes)
        } catch {
            throw StoreError.refused(reason: "device \(deviceID)'s stored descriptor does not decode: \(error)")
        }
    }
}
