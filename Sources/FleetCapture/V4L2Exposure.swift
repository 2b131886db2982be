import CV4L2
import FleetCore

/// Exposure through the standard V4L2 camera controls: EXPOSURE_AUTO, a menu of modes
/// (manual, auto, shutter priority, aperture priority), and EXPOSURE_ABSOLUTE, the time in
/// units of 100 µs. A device without a writable EXPOSURE_ABSOLUTE has no exposure the fleet
/// can set, whatever auto modes it has. Chosen once from the device's controls.
struct V4L2Exposure: Sendable {
    /// EXPOSURE_ABSOLUTE's unit, fixed by the V4L2 specification.
    static let unitSeconds = 100e-6
    static let manual = Int64(CAPFLEET_V4L2_EXPOSURE_MANUAL)

    let absolute: DeviceControl
    /// Nil for devices that only ever expose manually.
    let mode: DeviceControl?

    init?(controls: [DeviceControl]) {
        guard let absolute = controls.first(where: { $0.id == CAPFLEET_V4L2_CID_EXPOSURE_ABSOLUTE && !$0.isReadOnly }),
            absolute.maximum > 0, absolute.minimum <= absolute.maximum
        else { return nil }
        self.absolute = absolute
        mode = controls.first { $0.id == CAPFLEET_V4L2_CID_EXPOSURE_AUTO && !$0.isReadOnly }
    }

    var minimumSeconds: Double { Double(max(absolute.minimum, 0)) * Self.unitSeconds }
    var maximumSeconds: Double { Double(absolute.maximum) * Self.unitSeconds }

    /// The EXPOSURE_AUTO value `.automatic` sets: the driver's default if that is not manual
    /// (the mode the camera was made to run in), else aperture priority (what UVC webcams
    /// call auto), else full auto; nil when the menu has none of them.
    static func automaticMode(of mode: DeviceControl) -> Int64? {
        if mode.defaultValue != manual, offers(mode, mode.defaultValue) { return mode.defaultValue }
        return [Int64(CAPFLEET_V4L2_EXPOSURE_APERTURE_PRIORITY), Int64(CAPFLEET_V4L2_EXPOSURE_AUTO)].first { offers(mode, $0) }
    }

    /// Menus have holes (UVC offers 1 and 3 of 0...3); an unread menu falls back to the range.
    static func offers(_ mode: DeviceControl, _ value: Int64) -> Bool {
        mode.menu.isEmpty ? (mode.minimum...mode.maximum).contains(value) : mode.menu.contains { $0.value == value }
    }

    /// Why the device cannot take `request`, phrased for the operator, or nil when it can.
    func refusal(of request: ExposureRequest) -> String? {
        let offered = mode.map { mode in mode.menu.map(\.name).joined(separator: ", ") } ?? ""
        switch request {
        case .automatic:
            guard let mode else { return "it exposes manually only (it has no exposure auto control)" }
            if Self.automaticMode(of: mode) == nil { return "its exposure auto menu has no automatic mode (it offers: \(offered))" }
            return nil
        case .manual:
            if let mode, !Self.offers(mode, Self.manual) { return "its exposure auto menu has no manual mode (it offers: \(offered))" }
            return ExposureState(
                automatic: false, seconds: minimumSeconds, minimumSeconds: minimumSeconds,
                maximumSeconds: maximumSeconds
            ).refusal(of: request)
        }
    }

    /// The control value nearest `seconds` that the control takes: on its step from its
    /// minimum, within its range.
    func controlValue(forSeconds seconds: Double) -> Int64 {
        let units = min(max((seconds / Self.unitSeconds).rounded(), Double(absolute.minimum)), Double(absolute.maximum))
        let step = Int64(clamping: max(absolute.step, 1))
        let value = absolute.minimum + (Int64(units) - absolute.minimum + step / 2) / step * step
        // Rounding up may pass a maximum that is off the step: the last step below it then.
        return value > absolute.maximum ? max(value - step, absolute.minimum) : value
    }

    /// Where exposure is now (two ioctls). A time the driver will not read back (some refuse
    /// while auto exposure runs) is reported as the control's default.
    func state(of handle: V4L2Handle) -> ExposureState {
        let units = V4L2Controls.value(of: handle, id: absolute.id) ?? absolute.defaultValue
        let automatic = mode.flatMap { V4L2Controls.value(of: handle, id: $0.id) }.map { $0 != Self.manual } ?? false
        return ExposureState(
            automatic: automatic, seconds: Double(units) * Self.unitSeconds,
            minimumSeconds: minimumSeconds, maximumSeconds: maximumSeconds)
    }

    /// Applies a request `refusal(of:)` accepted.
    func apply(_ request: ExposureRequest, to handle: V4L2Handle) throws(V4L2Error) {
        switch request {
        case .automatic:
            guard let mode, let value = Self.automaticMode(of: mode) else { return }
            try V4L2Controls.set(handle, id: mode.id, to: value, name: "exposure_auto")
        case let .manual(seconds):
            // Drivers ignore (or refuse) the time while an auto mode runs: manual goes first.
            if let mode { try V4L2Controls.set(handle, id: mode.id, to: Self.manual, name: "exposure_auto") }
            try V4L2Controls.set(handle, id: absolute.id, to: controlValue(forSeconds: seconds), name: "exposure_time_absolute")
        }
    }
}
