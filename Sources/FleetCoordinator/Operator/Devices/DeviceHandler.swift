import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// Operator requests that change a device: format, frame rate, zoom, focus, leases,
/// policies, frame alignment, sync checks, detection and optics. The coordinator resolves a
/// request against the device's stored formats, pushes one command to the agent under the
/// device's configuration lease, records what the agent reports back, and audits the outcome
/// either way.
struct DeviceHandler: Sendable {
    let store: FleetDatabase
    let agents: any AgentCommands
    let leases: LeaseKeeper
    /// The device as it now is, for the replies.
    let listing: DeviceListing
    /// A device being recorded hears of its changes in its take's metadata.
    let takes: TakeDirector
    let clock: CoordinatorClock
    /// Where this run's frame-alignment grid starts (FleetTimeSource.alignmentGridOrigin).
    let alignmentGridOrigin: UInt64
    /// What exposure audits compare the timecodes cameras read with (ExposureAudit).
    let exposureTruth: ExposureAudit.Truth

    func lock(
        _ query: Capfleet_V1_LockDevice, by who: String, session: String?, into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        guard let device = try await store.existingDevice(query.deviceID, into: &reply) else { return }
        let answer = await leases.lock(device.id, by: OperatorCaller.holder(who), seconds: query.seconds, session: session)
        guard case .granted = answer else {
            reply.status = answer.status
            return
        }
        try await listing.listDevices(nodeID: device.nodeId, only: device.id, into: &reply)
    }

    func unlock(_ query: Capfleet_V1_UnlockDevice, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        guard let device = try await store.existingDevice(query.deviceID, into: &reply) else { return }
        let answer = await leases.unlock(device.id, by: OperatorCaller.holder(who))
        guard case .granted = answer else {
            reply.status = answer.status
            return
        }
        try await listing.listDevices(nodeID: device.nodeId, only: device.id, into: &reply)
    }

    /// Runs `change` under the device's configuration lease: refused, naming who holds it,
    /// unless `who` does; and the lease does not run out before `change` is done, so what it
    /// checked at the start still holds when the command goes out. False if refused.
    @discardableResult
    func underLease(
        _ device: DeviceRecord, _ who: String, _ action: String, into reply: inout Capfleet_V1_OperatorReply,
        _ change: (inout Capfleet_V1_OperatorReply) async throws(StoreError) -> Void
    ) async throws(StoreError) -> Bool {
        if case let .failure(refusal) = await leases.beginChange(device.id, by: OperatorCaller.holder(who)) {
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

    func changeFormat(_ query: Capfleet_V1_ChangeFormat, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        guard let device = try await store.existingDevice(query.deviceID, into: &reply) else { return }
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
        let answer = await agents.command(.setActiveFormat(.with { $0.formatIndex = UInt32(index) }), on: device)
        try await record(answer, on: device, action: "device.format", who: who, detail: formats[index].label, into: &reply)
        // The device keeps its rate where the new format runs it (FormatSelector.frameRate);
        // a rate asked for with the format is set next, so the device runs at the rate asked.
        guard answer.status.isOK, case let .bestMatch(_, _, _, fps?) = request, abs(answer.activeFrameRate - fps) > 1e-6 else { return }
        let rated = await agents.command(
            .setFrameRate(
                .with {
                    $0.framesPerSecond = fps; $0.minFramesPerSecond = fps
                }),
            on: device)
        try await record(rated, on: device, action: "device.frame_rate", who: who, detail: "\(VideoFormat.trim(fps)) fps", into: &reply)
        if !rated.status.isOK {
            reply.status.reason =
                "the format changed to \(formats[index].label), but not its rate to \(VideoFormat.trim(fps)) fps: \(rated.status.reason)"
        }
    }

    func changeFrameRate(
        _ query: Capfleet_V1_ChangeFrameRate, by who: String, into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        guard let device = try await store.existingDevice(query.deviceID, into: &reply) else { return }
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
        switch DeviceCommandRules.frameRateFit(minimum: slowest, maximum: fps, in: active) {
        case .fits:
            break
        case .inverted:
            reply.status = .failure(
                .badRequest, "the minimum rate \(VideoFormat.trim(slowest)) fps is above the maximum \(VideoFormat.trim(fps)) fps")
            return
        case let .outside(fps):
            let ranges = active.frameRateRanges.map { "\(VideoFormat.trim($0.minFramesPerSecond))-\(VideoFormat.trim($0.maxFramesPerSecond))" }
            let detail =
                "\(VideoFormat.trim(fps)) fps is outside the active format \(active.label); its ranges: \(ranges.joined(separator: ", ")) fps"
            try await audit(who, "device.frame_rate", device.id, outcome: "refused", detail: detail)
            reply.status = .failure(.unsupported, "device \(device.id): \(detail)")
            return
        }
        let answer = await agents.command(
            .setFrameRate(
                .with {
                    $0.framesPerSecond = fps
                    $0.minFramesPerSecond = slowest
                }), on: device)
        let detail = slowest < fps ? "\(VideoFormat.trim(slowest))-\(VideoFormat.trim(fps)) fps" : "\(VideoFormat.trim(fps)) fps"
        try await record(answer, on: device, action: "device.frame_rate", who: who, detail: detail, into: &reply)
        reply.activeFrameRate = answer.activeFrameRate
        reply.activeMinFrameRate = answer.activeMinFrameRate
    }

    func changeFocus(_ query: Capfleet_V1_ChangeFocus, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        guard let device = try await store.existingDevice(query.deviceID, into: &reply) else { return }
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
        let answer = await agents.command(.setFocus(request), on: device)
        try await record(answer, on: device, action: "device.focus", who: who, detail: FocusRequest(wire: request).summary, into: &reply)
        if answer.hasFocus { reply.focus = answer.focus }
    }

    func changeZoom(_ query: Capfleet_V1_ChangeZoom, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        guard let device = try await store.existingDevice(query.deviceID, into: &reply) else { return }
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
            guard DeviceCommandRules.zoomFits(query.factor, maximum: maximum) else {
                let detail = "zoom \(VideoFormat.trim(query.factor))x is outside the active format's range 1x-\(VideoFormat.trim(maximum))x"
                try await audit(who, "device.zoom", device.id, outcome: "refused", detail: detail)
                reply.status = .failure(.unsupported, "device \(device.id): \(detail)")
                return
            }
            guard DeviceCommandRules.rampRateFits(query.rampRate) else {
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
        let answer = await agents.command(
            .setZoom(
                .with {
                    $0.factor = query.factor
                    $0.rampRate = query.rampRate
                    $0.cancel = query.cancel
                }), on: device)
        try await record(answer, on: device, action: "device.zoom", who: who, detail: detail, into: &reply)
        reply.zoomFactor = answer.zoomFactor
        reply.zoomMethod = answer.zoomMethod
    }

    /// Stores what the agent reports, audits, and answers with the device as it now is.
    func record(
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
        try await listing.listDevices(nodeID: device.nodeId, only: device.id, into: &reply)
        // A device being recorded: the change goes into its take as timed metadata.
        var fields: [String: Any] = ["kind": action.replacingOccurrences(of: "device.", with: ""), "detail": detail, "by": who]
        if answer.activeFrameRate.isFinite, answer.activeFrameRate > 0 { fields["active_frame_rate"] = answer.activeFrameRate }
        if answer.zoomFactor.isFinite, answer.zoomFactor > 0 { fields["zoom_factor"] = answer.zoomFactor }
        await takes.deviceChanged(device.id, fields: fields)
    }

    func audit(_ who: String, _ action: String, _ target: String, outcome: String, detail: String) async throws(StoreError) {
        try await store.appendAudit(
            AuditEntry(
                at: clock.unixMilliseconds(), actor: OperatorCaller.holder(who),
                action: action, target: target, outcome: outcome, detail: detail))
    }
}
