import CV4L2
import FleetCore

/// Focus through the standard V4L2 camera controls: FOCUS_AUTO (continuous autofocus),
/// AUTO_FOCUS_START (one-shot), FOCUS_ABSOLUTE (lens position, scaled to 0...1) and
/// AUTO_FOCUS_RANGE (range restriction).
enum V4L2Focus {
    static func state(of handle: V4L2Handle, controls: [DeviceControl]) -> FocusState {
        var state = FocusState(mode: .locked)
        if V4L2Controls.value(of: handle, id: CAPFLEET_V4L2_CID_FOCUS_AUTO) == 1 { state.mode = .continuous }
        if let lens = controls.first(where: { $0.id == CAPFLEET_V4L2_CID_FOCUS_ABSOLUTE }), lens.maximum > lens.minimum,
            let value = V4L2Controls.value(of: handle, id: lens.id)
        {
            // V4L2: larger values focus closer; the fleet's 0 is nearest.
            state.lensPosition = Double(lens.maximum - value) / Double(lens.maximum - lens.minimum)
        }
        switch V4L2Controls.value(of: handle, id: CAPFLEET_V4L2_CID_AUTO_FOCUS_RANGE).map(Int32.init(truncatingIfNeeded:)) {
        case CAPFLEET_V4L2_AUTO_FOCUS_RANGE_MACRO?: state.rangeRestriction = .near
        case CAPFLEET_V4L2_AUTO_FOCUS_RANGE_INFINITY?: state.rangeRestriction = .far
        default: state.rangeRestriction = .none
        }
        return state
    }

    /// Applies a request already checked against the device's focus capabilities.
    static func apply(_ request: FocusRequest, to handle: V4L2Handle, controls: [DeviceControl]) throws(V4L2Error) {
        let has = Set(controls.map(\.id))
        if let range = request.rangeRestriction, has.contains(CAPFLEET_V4L2_CID_AUTO_FOCUS_RANGE) {
            let value: Int32 =
                switch range {
                case .none: CAPFLEET_V4L2_AUTO_FOCUS_RANGE_AUTO
                case .near: CAPFLEET_V4L2_AUTO_FOCUS_RANGE_MACRO
                case .far: CAPFLEET_V4L2_AUTO_FOCUS_RANGE_INFINITY
                }
            try V4L2Controls.set(handle, id: CAPFLEET_V4L2_CID_AUTO_FOCUS_RANGE, to: Int64(value), name: "auto_focus_range")
        }
        let mode = request.lensPosition != nil ? .locked : request.mode
        switch mode {
        case .continuous?:
            try V4L2Controls.set(handle, id: CAPFLEET_V4L2_CID_FOCUS_AUTO, to: 1, name: "focus_auto")
        case .auto?:
            if has.contains(CAPFLEET_V4L2_CID_FOCUS_AUTO) {
                try V4L2Controls.set(handle, id: CAPFLEET_V4L2_CID_FOCUS_AUTO, to: 0, name: "focus_auto")
            }
            try V4L2Controls.set(handle, id: CAPFLEET_V4L2_CID_AUTO_FOCUS_START, to: 1, name: "auto_focus_start")
        case .locked?:
            if has.contains(CAPFLEET_V4L2_CID_FOCUS_AUTO) {
                try V4L2Controls.set(handle, id: CAPFLEET_V4L2_CID_FOCUS_AUTO, to: 0, name: "focus_auto")
            }
        case nil:
            break
        }
        if let position = request.lensPosition, let lens = controls.first(where: { $0.id == CAPFLEET_V4L2_CID_FOCUS_ABSOLUTE }) {
            let value = lens.maximum - Int64((Double(lens.maximum - lens.minimum) * position).rounded())
            try V4L2Controls.set(handle, id: lens.id, to: value, name: "focus_absolute")
        }
    }
}
