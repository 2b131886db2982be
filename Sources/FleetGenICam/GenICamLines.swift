import CAravis

/// A GenICam camera's digital I/O as the standard features describe it (proto-docs/clock.md,
/// "Hardware-line triggers"): `LineSelector` picks a line, `LineMode` makes it an input or an
/// output, `LineSource` says what an output carries (`ExposureActive`: high while the sensor
/// exposes, which other cameras' `TriggerSource LineN` start their exposures on).
enum GenICamLines {
    /// An enumeration feature's entries, in the camera's order; none when it lacks the feature.
    static func entries(_ camera: UnsafeMutablePointer<ArvCamera>, _ deviceID: String, _ feature: String) -> [String] {
        guard ((try? aravisCall(deviceID, "asking for \(feature)") { arv_camera_is_feature_available(camera, feature, $0) }) ?? 0) != 0 else {
            return []
        }
        var count: UInt32 = 0
        guard
            let listed = try? aravisCall(
                deviceID, "listing \(feature)", { arv_camera_dup_available_enumerations_as_strings(camera, feature, &count, $0) })
        else { return [] }
        var names: [String] = []
        for index in 0..<Int(count) { if let name = listed[index] { names.append(String(cString: name)) } }
        capfleet_arv_free(UnsafeMutableRawPointer(mutating: listed))
        return names
    }

    /// `line` an output carrying `source` (`ExposureActive`, or `Off` to let it go).
    static func drive(_ camera: UnsafeMutablePointer<ArvCamera>, _ deviceID: String, line: String, source: String) throws(GenICamError) {
        try aravisCall(deviceID, "selecting \(line)") { arv_camera_set_string(camera, "LineSelector", line, $0) }
        if source != "Off", (try? aravisCall(deviceID, "asking for LineMode") { arv_camera_is_feature_available(camera, "LineMode", $0) }) ?? 0 != 0 {
            try aravisCall(deviceID, "making \(line) an output") { arv_camera_set_string(camera, "LineMode", "Output", $0) }
        }
        try aravisCall(deviceID, "driving \(line) with \(source)") { arv_camera_set_string(camera, "LineSource", source, $0) }
    }
}
