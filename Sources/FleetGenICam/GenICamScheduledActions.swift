import CAravis
import FleetCore

/// A GigE Vision camera's PTP clock and scheduled action commands, as GenICam's standard
/// features describe them (proto-docs clock.md, "Scheduled action commands"): `PtpStatus` (or
/// the older `GevIEEE1588Status`), and `ActionDeviceKey`, `ActionSelector`, `ActionGroupKey`,
/// `ActionGroupMask` with `Action1` among FrameStart's trigger sources. Nil from `detect` for a
/// camera that lacks any of them (USB3 Vision has no action commands at all).
struct GenICamScheduledActions: Sendable {
    /// The feature that says the camera's PTP state.
    let statusFeature: String
    let hasSelector: Bool
    /// The keys this agent gives the camera, so that only its commands start exposures.
    let deviceKey: UInt32
    let groupKey: UInt32
    static let groupMask: UInt32 = 1

    /// The PTP states in which the camera's clock follows its domain's grandmaster (or is it).
    static let lockedStates: Set<String> = ["Slave", "Master"]

    static func detect(_ camera: UnsafeMutablePointer<ArvCamera>, info: GenICamDeviceInfo) -> GenICamScheduledActions? {
        let deviceID = info.deviceID
        guard info.protocolName == "GigEVision" else { return nil }
        func has(_ feature: String) -> Bool {
            ((try? aravisCall(deviceID, "asking for \(feature)") { arv_camera_is_feature_available(camera, feature, $0) }) ?? 0) != 0
        }
        guard has("ActionDeviceKey"), has("ActionGroupKey"), has("ActionGroupMask"), has("TriggerSource"),
            let status = ["PtpStatus", "GevIEEE1588Status"].first(where: has)
        else { return nil }
        guard GenICamLines.entries(camera, deviceID, "TriggerSource").contains("Action1") else { return nil }
        return GenICamScheduledActions(
            statusFeature: status, hasSelector: has("ActionSelector"), deviceKey: UInt32.random(in: 1...UInt32.max),
            groupKey: UInt32.random(in: 1...UInt32.max))
    }

    /// The camera's PTP state now (`Slave`, `Listening`, `Disabled` …); nil when it will not say.
    func status(_ camera: UnsafeMutablePointer<ArvCamera>, deviceID: String) -> String? {
        guard let text = try? aravisCall(deviceID, "reading \(statusFeature)", { arv_camera_get_string(camera, statusFeature, $0) }) else {
            return nil
        }
        return String(cString: text)
    }

    /// FrameStart waits for action 1, whose keys and mask are this agent's.
    func enterActionMode(_ camera: UnsafeMutablePointer<ArvCamera>, deviceID: String) throws(GenICamError) {
        if hasSelector { try aravisCall(deviceID, "selecting action 1") { arv_camera_set_integer(camera, "ActionSelector", 1, $0) } }
        try aravisCall(deviceID, "setting its action device key") { arv_camera_set_integer(camera, "ActionDeviceKey", Int(deviceKey), $0) }
        try aravisCall(deviceID, "setting its action group key") { arv_camera_set_integer(camera, "ActionGroupKey", Int(groupKey), $0) }
        try aravisCall(deviceID, "setting its action group mask") { arv_camera_set_integer(camera, "ActionGroupMask", Int(Self.groupMask), $0) }
        try aravisCall(deviceID, "entering action trigger mode") { arv_camera_set_trigger(camera, "Action1", $0) }
    }

    /// The command that starts an exposure at `cameraTime` (the camera's own ns). Sent unicast
    /// with no acknowledgement asked: one would say the command arrived, not that the exposure
    /// started, and a frame that never comes shows in the alignment's figures anyway.
    func command(at cameraTime: UInt64, requestID: UInt16) -> GVCPActionCommand {
        GVCPActionCommand(
            deviceKey: deviceKey, groupKey: groupKey, groupMask: Self.groupMask, actionTime: cameraTime, acknowledge: false,
            requestID: requestID == 0 ? 1 : requestID)
    }
}
