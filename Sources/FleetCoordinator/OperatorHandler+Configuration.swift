import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// Operator requests that change a device: active format and frame rate. The coordinator
/// resolves the request against the device's stored format list, pushes one command to the
/// agent, records what the agent reports back, and audits the outcome either way.
extension OperatorHandler {
    func lock(
        _ query: Capfleet_V1_LockDevice, operator who: String, session: String?, into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        guard let device = try await existingDevice(query.deviceID, into: &reply) else { return }
        let answer = await leases.lock(device.id, by: holder(who), seconds: query.seconds, session: session)
        guard case .granted = answer else {
            reply.status = answer.status
            return
        }
        try await listDevices(nodeID: device.nodeId, only: device.id, into: &reply)
    }

    func unlock(_ query: Capfleet_V1_UnlockDevice, operator who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        guard let device = try await existingDevice(query.deviceID, into: &reply) else { return }
        let answer = await leases.unlock(device.id, by: holder(who))
        guard case .granted = answer else {
            reply.status = answer.status
            return
        }
        try await listDevices(nodeID: device.nodeId, only: device.id, into: &reply)
    }

    /// The device, or a NOT_FOUND reply that points at the listing.
    func existingDevice(_ deviceID: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) -> DeviceRecord? {
        guard let device = try await store.device(deviceID) else {
            reply.status = .failure(.notFound, "no device \(deviceID); see capfleet devices")
            return nil
        }
        return device
    }

    func holder(_ who: String) -> String { who.isEmpty ? "unknown operator" : who }

    /// Runs `change` under the device's configuration lease: refused, naming who holds it,
    /// unless `who` does; and the lease does not run out before `change` is done, so what it
    /// checked at the start still holds when the command goes out. False if refused.
    @discardableResult
    func underLease(
        _ device: DeviceRecord, _ who: String, _ action: String, into reply: inout Capfleet_V1_OperatorReply,
        _ change: (inout Capfleet_V1_OperatorReply) async throws(StoreError) -> Void
    ) async throws(StoreError) -> Bool {
        if case let .failure(refusal) = await leases.beginChange(device.id, by: holder(who)) {
            try await audit(who, action, device.id, outcome: "refused", detail: refusal.description)
            reply.status = .failure(.permissionDenied, refusal.description)
            return false
        }
        do {
            try await change(&reply)
        } catch {
            await leases.endChange(device.id)
            throw error
        }
        await leases.endChange(device.id)
        return true
    }

    func changeFormat(_ query: Capfleet_V1_ChangeFormat, operator who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        guard let device = try await existingDevice(query.deviceID, into: &reply) else { return }
        try await underLease(device, who, "device.format", into: &reply) { reply throws(StoreError) in
            try await changeFormat(query, on: device, by: who, into: &reply)
        }
    }

    private func changeFormat(
        _ query: Capfleet_V1_ChangeFormat, on device: DeviceRecord, by who: String, into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        let formats = try await store.formats(deviceID: device.id)
        let request: FormatRequest
        switch query.choice {
        case let .formatIndex(index)?:
            request = .index(Int(index))
        case let .bestMatch(match)?:
            request = .bestMatch(
                width: match.width > 0 ? Int(match.width) : nil, height: match.height > 0 ? Int(match.height) : nil,
                pixelFormat: match.pixelFormat.isEmpty ? nil : PixelFormat(match.pixelFormat.uppercased()),
                framesPerSecond: match.framesPerSecond > 0 ? match.framesPerSecond : nil)
        case let .preset(name)?:
            guard let preset = FormatPreset(rawValue: name.lowercased()) else {
                reply.status = .failure(.badRequest, "no preset \(name); presets: \(FormatPreset.allCases.map(\.rawValue).joined(separator: ", "))")
                return
            }
            request = .preset(preset)
        case nil:
            reply.status = .failure(.badRequest, "say which format: an index, a best match or a preset")
            return
        }
        let index: Int
        switch FormatSelector.select(request, from: formats) {
        case let .success(chosen): index = chosen
        case let .failure(refusal):
            try await audit(who, "device.format", device.id, outcome: "refused", detail: refusal.description)
            reply.status = .failure(.unsupported, "device \(device.id): \(refusal.description)")
            return
        }
        let answer = await control.command(.setActiveFormat(.with { $0.formatIndex = UInt32(index) }), deviceID: device.id, nodeID: device.nodeId)
        try await record(answer, on: device, action: "device.format", who: who, detail: formats[index].label, into: &reply)
        // The device keeps its rate where the new format runs it (FormatSelector.frameRate);
        // a rate asked for with the format is set next, so the device runs at the rate asked.
        guard answer.status.isOK, case let .bestMatch(_, _, _, fps?) = request, abs(answer.activeFrameRate - fps) > 1e-6 else { return }
        let rated = await control.command(
            .setFrameRate(
                .with {
                    $0.framesPerSecond = fps; $0.minFramesPerSecond = fps
                }),
            deviceID: device.id, nodeID: device.nodeId)
        try await record(rated, on: device, action: "device.frame_rate", who: who, detail: "\(VideoFormat.trim(fps)) fps", into: &reply)
        if !rated.status.isOK {
            reply.status.reason =
                "the format changed to \(formats[index].label), but not its rate to \(VideoFormat.trim(fps)) fps: \(rated.status.reason)"
        }
    }

    func changeFrameRate(
        _ query: Capfleet_V1_ChangeFrameRate, operator who: String, into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        guard let device = try await existingDevice(query.deviceID, into: &reply) else { return }
        try await underLease(device, who, "device.frame_rate", into: &reply) { reply throws(StoreError) in
            try await changeFrameRate(query, on: device, by: who, into: &reply)
        }
    }

    private func changeFrameRate(
        _ query: Capfleet_V1_ChangeFrameRate, on device: DeviceRecord, by who: String, into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        let formats = try await store.formats(deviceID: device.id)
        guard formats.indices.contains(device.activeFormatPosition) else {
            reply.status = .failure(.internal, "device \(device.id) has no active format on record")
            return
        }
        let active = formats[device.activeFormatPosition]
        let fps = query.framesPerSecond > 0 ? query.framesPerSecond : FormatSelector.defaultFrameRate(of: active)
        let slowest = query.minFramesPerSecond > 0 ? query.minFramesPerSecond : fps
        guard slowest <= fps else {
            reply.status = .failure(
                .badRequest, "the minimum rate \(VideoFormat.trim(slowest)) fps is above the maximum \(VideoFormat.trim(fps)) fps")
            return
        }
        for fps in [slowest, fps] where !active.supports(framesPerSecond: fps) {
            let ranges = active.frameRateRanges.map { "\(VideoFormat.trim($0.minFramesPerSecond))-\(VideoFormat.trim($0.maxFramesPerSecond))" }
            let detail =
                "\(VideoFormat.trim(fps)) fps is outside the active format \(active.label); its ranges: \(ranges.joined(separator: ", ")) fps"
            try await audit(who, "device.frame_rate", device.id, outcome: "refused", detail: detail)
            reply.status = .failure(.unsupported, "device \(device.id): \(detail)")
            return
        }
        let answer = await control.command(
            .setFrameRate(
                .with {
                    $0.framesPerSecond = fps
                    $0.minFramesPerSecond = slowest
                }), deviceID: device.id, nodeID: device.nodeId)
        let detail = slowest < fps ? "\(VideoFormat.trim(slowest))-\(VideoFormat.trim(fps)) fps" : "\(VideoFormat.trim(fps)) fps"
        try await record(answer, on: device, action: "device.frame_rate", who: who, detail: detail, into: &reply)
        reply.activeFrameRate = answer.activeFrameRate
        reply.activeMinFrameRate = answer.activeMinFrameRate
    }

    func changeFocus(_ query: Capfleet_V1_ChangeFocus, operator who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        guard let device = try await existingDevice(query.deviceID, into: &reply) else { return }
        try await underLease(device, who, "device.focus", into: &reply) { reply throws(StoreError) in
            try await changeFocus(query, on: device, by: who, into: &reply)
        }
    }

    private func changeFocus(
        _ query: Capfleet_V1_ChangeFocus, on device: DeviceRecord, by who: String, into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        let request = Capfleet_V1_SetFocus.with {
            $0.mode = query.mode
            if query.hasLensPosition { $0.lensPosition = query.lensPosition }
            if query.hasPointOfInterestX { $0.pointOfInterestX = query.pointOfInterestX }
            if query.hasPointOfInterestY { $0.pointOfInterestY = query.pointOfInterestY }
            $0.range = query.range
            if query.hasSmooth { $0.smooth = query.smooth }
        }
        // The agent knows what its device can do and refuses the rest, naming what it has.
        let answer = await control.command(.setFocus(request), deviceID: device.id, nodeID: device.nodeId)
        try await record(answer, on: device, action: "device.focus", who: who, detail: FocusRequest(wire: request).summary, into: &reply)
        if answer.hasFocus { reply.focus = answer.focus }
    }

    func setDropRecovery(
        _ query: Capfleet_V1_SetDropRecoveryPolicy, operator who: String,
        into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        guard let device = try await existingDevice(query.deviceID, into: &reply) else { return }
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
            audit: AuditEntry(at: now, actor: holder(who), action: "device.policy", target: device.id, outcome: "ok", detail: detail))
        guard await control.isOnline(device.nodeId) else {
            try await listDevices(nodeID: device.nodeId, only: device.id, into: &reply)
            reply.status = .with {
                $0.code = .ok; $0.reason = "stored; node \(device.nodeId) is offline and gets the policy when it registers"
            }
            return
        }
        let answer = await control.command(.setDropRecovery(.with { $0.policy = policy.wire }), deviceID: device.id, nodeID: device.nodeId)
        try await record(answer, on: device, action: "device.policy.push", who: who, detail: detail, into: &reply)
    }

    func changePressurePolicy(
        _ query: Capfleet_V1_ChangePressurePolicy, operator who: String,
        into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        guard let device = try await existingDevice(query.deviceID, into: &reply) else { return }
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
            audit: AuditEntry(at: now, actor: holder(who), action: "device.policy", target: device.id, outcome: "ok", detail: detail))
        guard await control.isOnline(device.nodeId) else {
            try await listDevices(nodeID: device.nodeId, only: device.id, into: &reply)
            reply.status = .with {
                $0.code = .ok; $0.reason = "stored; node \(device.nodeId) is offline and gets the policy when it registers"
            }
            return
        }
        let answer = await control.command(.setPressurePolicy(.with { $0.policy = policy.wire() }), deviceID: device.id, nodeID: device.nodeId)
        try await record(answer, on: device, action: "device.policy.push", who: who, detail: detail, into: &reply)
    }

    func changeZoom(_ query: Capfleet_V1_ChangeZoom, operator who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        guard let device = try await existingDevice(query.deviceID, into: &reply) else { return }
        try await underLease(device, who, "device.zoom", into: &reply) { reply throws(StoreError) in
            try await changeZoom(query, on: device, by: who, into: &reply)
        }
    }

    private func changeZoom(
        _ query: Capfleet_V1_ChangeZoom, on device: DeviceRecord, by who: String, into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        let formats = try await store.formats(deviceID: device.id)
        let maximum = formats.indices.contains(device.activeFormatPosition) ? formats[device.activeFormatPosition].maxZoomFactor : 1
        if !query.cancel {
            guard query.factor >= 1, query.factor <= maximum else {
                let detail = "zoom \(VideoFormat.trim(query.factor))x is outside the active format's range 1x-\(VideoFormat.trim(maximum))x"
                try await audit(who, "device.zoom", device.id, outcome: "refused", detail: detail)
                reply.status = .failure(.unsupported, "device \(device.id): \(detail)")
                return
            }
            guard query.rampRate >= 0, query.rampRate <= 16 else {
                reply.status = .failure(.badRequest, "a ramp rate is 0 (jump) or up to 16 powers of two per second")
                return
            }
        }
        let detail =
            query.cancel
            ? "cancel ramp"
            : query.rampRate > 0
                ? "ramp to \(VideoFormat.trim(query.factor))x at \(VideoFormat.trim(query.rampRate))/s"
                : "\(VideoFormat.trim(query.factor))x"
        let answer = await control.command(
            .setZoom(
                .with {
                    $0.factor = query.factor
                    $0.rampRate = query.rampRate
                    $0.cancel = query.cancel
                }), deviceID: device.id, nodeID: device.nodeId)
        try await record(answer, on: device, action: "device.zoom", who: who, detail: detail, into: &reply)
        reply.zoomFactor = answer.zoomFactor
        reply.zoomMethod = answer.zoomMethod
    }

    /// Stores what the agent reports, audits, and answers with the device as it now is.
    private func record(
        _ answer: Capfleet_V1_CommandReply, on device: DeviceRecord, action: String, who: String, detail: String,
        into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        if answer.status.isOK {
            // An agent's answer is not trusted to be a finite number (SQLite keeps NaN as NULL).
            try await store.setActiveFormat(
                deviceID: device.id, position: Int(answer.activeFormatIndex),
                frameRate: answer.activeFrameRate.isFinite ? answer.activeFrameRate : 0)
        }
        try await audit(
            who, action, device.id, outcome: answer.status.isOK ? "ok" : "failed",
            detail: answer.status.isOK ? detail : "\(detail): \(answer.status.reason)")
        guard answer.status.isOK else {
            reply.status = answer.status
            return
        }
        try await listDevices(nodeID: device.nodeId, only: device.id, into: &reply)
        // A device being recorded: the change goes into its take as timed metadata.
        var fields: [String: Any] = ["kind": action.replacingOccurrences(of: "device.", with: ""), "detail": detail, "by": who]
        if answer.activeFrameRate.isFinite, answer.activeFrameRate > 0 { fields["active_frame_rate"] = answer.activeFrameRate }
        if answer.zoomFactor.isFinite, answer.zoomFactor > 0 { fields["zoom_factor"] = answer.zoomFactor }
        await takes.deviceChanged(device.id, fields: fields)
    }

    func audit(_ who: String, _ action: String, _ target: String, outcome: String, detail: String) async throws(StoreError) {
        try await store.appendAudit(
            AuditEntry(
                at: clock.unixMilliseconds(), actor: who.isEmpty ? "unknown operator" : who,
                action: action, target: target, outcome: outcome, detail: detail))
    }
}
