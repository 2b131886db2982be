import CAravis
import FleetCore

/// A GenICam camera's gain, automatic gain and exposure, and white balance, described as the
/// fleet describes any camera's controls (device-model.md, "GenICam cameras"): under the
/// V4L2 control ids that mean the same, so a client that knows V4L2's gain knows this one, with
/// the units said in each name. Read once, when the camera is opened; a feature the camera
/// lacks, or refuses to read, is left out.
enum GenICamControls {
    /// V4L2's ids for the same controls (linux/v4l2-controls.h).
    static let gainID: UInt32 = 0x0098_0913
    static let automaticGainID: UInt32 = 0x0098_0912
    static let automaticExposureID: UInt32 = 0x009A_0901
    static let automaticWhiteBalanceID: UInt32 = 0x0098_090C
    static let redBalanceID: UInt32 = 0x0098_090E
    static let blueBalanceID: UInt32 = 0x0098_090F

    static func read(_ camera: UnsafeMutablePointer<ArvCamera>, deviceID: String) -> [DeviceControl] {
        var controls: [DeviceControl] = []
        if let gain = gain(camera, deviceID) { controls.append(gain) }
        for (feature, id, name) in [
            ("GainAuto", automaticGainID, "Gain, Automatic"), ("ExposureAuto", automaticExposureID, "Exposure, Automatic"),
            ("BalanceWhiteAuto", automaticWhiteBalanceID, "White Balance, Automatic"),
        ] {
            if let menu = menu(camera, deviceID, feature: feature, id: id, name: name) { controls.append(menu) }
        }
        controls += balanceRatios(camera, deviceID)
        return controls
    }

    /// The enumeration feature behind each menu control.
    static let menuFeatures: [UInt32: String] = [
        automaticGainID: "GainAuto", automaticExposureID: "ExposureAuto", automaticWhiteBalanceID: "BalanceWhiteAuto",
    ]

    /// Sets `control` (one `read` gave) to `value`, already checked against its range, and
    /// reads it back.
    static func set(
        _ control: DeviceControl, to value: Int64, on camera: UnsafeMutablePointer<ArvCamera>, deviceID: String
    ) throws(GenICamError) -> DeviceControl {
        switch control.id {
        case gainID:
            let gain = control.name == "Gain (0.01 dB)" ? Double(value) / 100 : Double(value)
            try aravisCall(deviceID, "setting its gain to \(gain)") { arv_camera_set_gain(camera, gain, $0) }
        case redBalanceID, blueBalanceID:
            let channel = control.id == redBalanceID ? "Red" : "Blue"
            let selected = string(camera, deviceID, "BalanceRatioSelector")
            defer {
                if let selected {
                    _ = try? aravisCall(deviceID, "restoring BalanceRatioSelector") {
                        arv_camera_set_string(camera, "BalanceRatioSelector", selected, $0)
                    }
                }
            }
            try aravisCall(deviceID, "selecting the \(channel) balance") { arv_camera_set_string(camera, "BalanceRatioSelector", channel, $0) }
            try aravisCall(deviceID, "setting the \(channel) balance") { arv_camera_set_float(camera, "BalanceRatio", Double(value) / 1000, $0) }
        default:
            guard let feature = menuFeatures[control.id], let item = control.menu.first(where: { $0.value == value }) else {
                throw GenICamError(
                    device: deviceID, operation: "setting \(control.name)", message: "the fleet does not set this control on GenICam cameras")
            }
            try aravisCall(deviceID, "setting \(feature) to \(item.name)") { arv_camera_set_string(camera, feature, item.name, $0) }
        }
        guard let readBack = read(camera, deviceID: deviceID).first(where: { $0.id == control.id }) else {
            throw GenICamError(device: deviceID, operation: "reading \(control.name) back", message: "the camera no longer reports it")
        }
        return readBack
    }

    private static func has(_ camera: UnsafeMutablePointer<ArvCamera>, _ deviceID: String, _ feature: String) -> Bool {
        ((try? aravisCall(deviceID, "asking for \(feature)") { arv_camera_is_feature_available(camera, feature, $0) }) ?? 0) != 0
    }

    /// `Gain` in dB (a float, given in hundredths), or an older camera's `GainRaw` as it is.
    private static func gain(_ camera: UnsafeMutablePointer<ArvCamera>, _ deviceID: String) -> DeviceControl? {
        guard ((try? aravisCall(deviceID, "asking for gain") { arv_camera_is_gain_available(camera, $0) }) ?? 0) != 0 else { return nil }
        var low = 0.0, high = 0.0
        guard (try? aravisCall(deviceID, "reading its gain range") { arv_camera_get_gain_bounds(camera, &low, &high, $0) }) != nil,
            let now = try? aravisCall(deviceID, "reading its gain", { arv_camera_get_gain(camera, $0) })
        else { return nil }
        let inDecibels = has(camera, deviceID, "Gain")
        let scale = inDecibels ? 100.0 : 1.0
        return DeviceControl(
            id: gainID, name: inDecibels ? "Gain (0.01 dB)" : "Gain (raw)", kind: .integer, minimum: Int64((low * scale).rounded()),
            maximum: Int64((high * scale).rounded()), step: 1, defaultValue: Int64((low * scale).rounded()), value: Int64((now * scale).rounded()),
            isInactive: automatic(camera, deviceID, "GainAuto"))
    }

    /// Whether an `…Auto` feature is on now (anything but `Off`).
    private static func automatic(_ camera: UnsafeMutablePointer<ArvCamera>, _ deviceID: String, _ feature: String) -> Bool {
        guard has(camera, deviceID, feature), let value = string(camera, deviceID, feature) else { return false }
        return value != "Off"
    }

    private static func string(_ camera: UnsafeMutablePointer<ArvCamera>, _ deviceID: String, _ feature: String) -> String? {
        guard let text = try? aravisCall(deviceID, "reading \(feature)", { arv_camera_get_string(camera, feature, $0) }) else { return nil }
        return String(cString: text)
    }

    /// An enumeration (`Off`, `Once`, `Continuous`) as a menu of its entries, in the camera's order.
    private static func menu(
        _ camera: UnsafeMutablePointer<ArvCamera>, _ deviceID: String, feature: String, id: UInt32, name: String
    ) -> DeviceControl? {
        guard has(camera, deviceID, feature) else { return nil }
        var count: UInt32 = 0
        guard
            let entries = try? aravisCall(
                deviceID, "listing \(feature)", { arv_camera_dup_available_enumerations_as_strings(camera, feature, &count, $0) })
        else { return nil }
        var names: [String] = []
        for index in 0..<Int(count) { if let entry = entries[index] { names.append(String(cString: entry)) } }
        capfleet_arv_free(UnsafeMutableRawPointer(mutating: entries))
        guard !names.isEmpty, let current = string(camera, deviceID, feature) else { return nil }
        let items = names.enumerated().map { DeviceControl.MenuItem(index: UInt32($0.offset), name: $0.element, value: Int64($0.offset)) }
        return DeviceControl(
            id: id, name: name, kind: .menu, minimum: 0, maximum: Int64(names.count - 1), step: 1, defaultValue: 0,
            value: names.firstIndex(of: current).map { Int64($0) }, menu: items)
    }

    /// `BalanceRatio` for the red and blue channels (`BalanceRatioSelector`), in thousandths;
    /// the selector is put back as it was.
    private static func balanceRatios(_ camera: UnsafeMutablePointer<ArvCamera>, _ deviceID: String) -> [DeviceControl] {
        guard has(camera, deviceID, "BalanceRatio"), has(camera, deviceID, "BalanceRatioSelector"),
            let selected = string(camera, deviceID, "BalanceRatioSelector")
        else { return [] }
        defer {
            _ = try? aravisCall(deviceID, "restoring BalanceRatioSelector") { arv_camera_set_string(camera, "BalanceRatioSelector", selected, $0) }
        }
        let isInactive = automatic(camera, deviceID, "BalanceWhiteAuto")
        var controls: [DeviceControl] = []
        for (channel, id) in [("Red", redBalanceID), ("Blue", blueBalanceID)] {
            var low = 0.0, high = 0.0
            guard
                (try? aravisCall(deviceID, "selecting the \(channel) balance") { arv_camera_set_string(camera, "BalanceRatioSelector", channel, $0) })
                    != nil,
                (try? aravisCall(deviceID, "reading the \(channel) balance range") {
                    arv_camera_get_float_bounds(camera, "BalanceRatio", &low, &high, $0)
                }) != nil,
                let now = try? aravisCall(deviceID, "reading the \(channel) balance", { arv_camera_get_float(camera, "BalanceRatio", $0) })
            else { continue }
            controls.append(
                DeviceControl(
                    id: id, name: "\(channel) Balance (0.001)", kind: .integer, minimum: Int64((low * 1000).rounded()),
                    maximum: Int64((high * 1000).rounded()), step: 1, defaultValue: 1000, value: Int64((now * 1000).rounded()),
                    isInactive: isInactive))
        }
        return controls
    }
}
