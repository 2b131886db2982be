import CV4L2
import FleetCore

/// Reads a device's controls (VIDIOC_QUERY_EXT_CTRL, menus through VIDIOC_QUERYMENU) and
/// crop capabilities (VIDIOC_G_SELECTION), and sets integer controls.
enum V4L2Controls {
    static func all(of handle: V4L2Handle) -> [DeviceControl] {
        var controls: [DeviceControl] = []
        var next = CAPFLEET_V4L2_CTRL_FLAG_NEXT_CTRL | CAPFLEET_V4L2_CTRL_FLAG_NEXT_COMPOUND
        while true {
            var query = v4l2_query_ext_ctrl()
            query.id = next
            guard handle.attempt(CAPFLEET_VIDIOC_QUERY_EXT_CTRL, &query) == nil else { break }
            next = query.id | CAPFLEET_V4L2_CTRL_FLAG_NEXT_CTRL | CAPFLEET_V4L2_CTRL_FLAG_NEXT_COMPOUND
            if query.type == CAPFLEET_V4L2_CTRL_TYPE_CTRL_CLASS || query.flags & CAPFLEET_V4L2_CTRL_FLAG_DISABLED != 0 { continue }
            let kind = kind(of: query.type)
            let menu = (kind == .menu || kind == .integerMenu) ? menuItems(of: handle, query: query, integer: kind == .integerMenu) : []
            let readable =
                query.flags & CAPFLEET_V4L2_CTRL_FLAG_WRITE_ONLY == 0
                && [.integer, .boolean, .menu, .integerMenu, .bitmask].contains(kind)
            controls.append(
                DeviceControl(
                    id: query.id, name: fixedString(query.name), kind: kind, minimum: query.minimum, maximum: query.maximum,
                    step: query.step, defaultValue: query.default_value, value: readable ? value(of: handle, id: query.id) : nil,
                    menu: menu, isReadOnly: query.flags & CAPFLEET_V4L2_CTRL_FLAG_READ_ONLY != 0,
                    isInactive: query.flags & CAPFLEET_V4L2_CTRL_FLAG_INACTIVE != 0))
        }
        return controls
    }

    static func kind(of type: UInt32) -> DeviceControl.Kind {
        switch type {
        case CAPFLEET_V4L2_CTRL_TYPE_INTEGER: .integer
        case CAPFLEET_V4L2_CTRL_TYPE_BOOLEAN: .boolean
        case CAPFLEET_V4L2_CTRL_TYPE_MENU: .menu
        case CAPFLEET_V4L2_CTRL_TYPE_BUTTON: .button
        case CAPFLEET_V4L2_CTRL_TYPE_INTEGER64: .integer64
        case CAPFLEET_V4L2_CTRL_TYPE_STRING: .string
        case CAPFLEET_V4L2_CTRL_TYPE_BITMASK: .bitmask
        case CAPFLEET_V4L2_CTRL_TYPE_INTEGER_MENU: .integerMenu
        default: .other
        }
    }

    static func menuItems(of handle: V4L2Handle, query: v4l2_query_ext_ctrl, integer: Bool) -> [DeviceControl.MenuItem] {
        guard query.minimum >= 0, query.maximum >= query.minimum, query.maximum - query.minimum < 1024 else { return [] }
        var items: [DeviceControl.MenuItem] = []
        for index in query.minimum...query.maximum {
            var item = v4l2_querymenu()
            item.id = query.id
            item.index = UInt32(index)
            // Drivers leave holes in menus; a refused index is simply not an item.
            guard handle.attempt(CAPFLEET_VIDIOC_QUERYMENU, &item) == nil else { continue }
            let value = Int64(capfleet_querymenu_value(&item))
            let name = integer ? String(value) : String(cString: capfleet_querymenu_name(&item))
            items.append(DeviceControl.MenuItem(index: UInt32(index), name: name, value: integer ? value : index))
        }
        return items
    }

    static func value(of handle: V4L2Handle, id: UInt32) -> Int64? {
        var control = v4l2_control()
        control.id = id
        guard handle.attempt(CAPFLEET_VIDIOC_G_CTRL, &control) == nil else { return nil }
        return Int64(control.value)
    }

    static func set(_ handle: V4L2Handle, id: UInt32, to value: Int64, name: String) throws(V4L2Error) {
        var control = v4l2_control()
        control.id = id
        control.value = Int32(clamping: value)
        try handle.ioctl(CAPFLEET_VIDIOC_S_CTRL, &control, "VIDIOC_S_CTRL(\(name))")
    }

    static func crop(of handle: V4L2Handle) -> CropCapabilities? {
        guard let bounds = selection(of: handle, target: CAPFLEET_V4L2_SEL_TGT_CROP_BOUNDS) else { return nil }
        let defaultRectangle = selection(of: handle, target: CAPFLEET_V4L2_SEL_TGT_CROP_DEFAULT) ?? bounds
        return CropCapabilities(bounds: bounds, defaultRectangle: defaultRectangle)
    }

    static func selection(of handle: V4L2Handle, target: UInt32) -> PixelRectangle? {
        var selection = v4l2_selection()
        selection.type = CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE
        selection.target = target
        guard handle.attempt(CAPFLEET_VIDIOC_G_SELECTION, &selection) == nil, selection.r.width > 0 else { return nil }
        return PixelRectangle(
            left: Int(selection.r.left), top: Int(selection.r.top),
            width: Int(selection.r.width), height: Int(selection.r.height))
    }

    /// Sets the crop rectangle; returns the one the driver chose (it may adjust it).
    static func setCrop(_ handle: V4L2Handle, to rectangle: PixelRectangle) throws(V4L2Error) -> PixelRectangle {
        var selection = v4l2_selection()
        selection.type = CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE
        selection.target = CAPFLEET_V4L2_SEL_TGT_CROP
        selection.r = v4l2_rect(
            left: Int32(rectangle.left), top: Int32(rectangle.top),
            width: UInt32(rectangle.width), height: UInt32(rectangle.height))
        try handle.ioctl(CAPFLEET_VIDIOC_S_SELECTION, &selection, "VIDIOC_S_SELECTION(crop)")
        return PixelRectangle(
            left: Int(selection.r.left), top: Int(selection.r.top),
            width: Int(selection.r.width), height: Int(selection.r.height))
    }

    /// What the standard focus controls allow. V4L2 has no point-of-interest or smooth
    /// focus controls, so those are never offered on V4L2 devices.
    static func focusCapabilities(from controls: [DeviceControl]) -> FocusCapabilities {
        let ids = Set(controls.map(\.id))
        var modes: [FocusMode] = []
        let lens = ids.contains(CAPFLEET_V4L2_CID_FOCUS_ABSOLUTE)
        if lens || ids.contains(CAPFLEET_V4L2_CID_FOCUS_AUTO) { modes.append(.locked) }
        if ids.contains(CAPFLEET_V4L2_CID_AUTO_FOCUS_START) { modes.append(.auto) }
        if ids.contains(CAPFLEET_V4L2_CID_FOCUS_AUTO) { modes.append(.continuous) }
        return FocusCapabilities(
            modes: modes, lensPosition: lens, pointOfInterest: false,
            rangeRestriction: ids.contains(CAPFLEET_V4L2_CID_AUTO_FOCUS_RANGE), smoothFocus: false)
    }
}

/// How a V4L2 device zooms, chosen once from what it offers, in order of preference:
/// its zoom control, the driver's crop selection, or a crop and scale in the agent.
enum ZoomCapability: Sendable {
    case control(id: UInt32, minimum: Int64, maximum: Int64)
    case crop(CropCapabilities)
    case agent

    /// The agent never crops further than this: past it the picture is mostly interpolation.
    static let agentMaximumFactor = 4.0

    init(controls: [DeviceControl], crop: CropCapabilities?) {
        if let zoom = controls.first(where: { $0.id == CAPFLEET_V4L2_CID_ZOOM_ABSOLUTE && !$0.isReadOnly }), zoom.maximum > zoom.minimum {
            self = .control(id: zoom.id, minimum: zoom.minimum, maximum: zoom.maximum)
        } else if let crop {
            self = .crop(crop)
        } else {
            self = .agent
        }
    }

    var method: ZoomMethod {
        switch self {
        case .control: .deviceControl
        case .crop: .cropSelection
        case .agent: .agentCrop
        }
    }

    func limits(forWidth width: Int) -> (maximum: Double, upscaleThreshold: Double?) {
        switch self {
        case let .control(_, minimum, maximum):
            // V4L2 leaves zoom units to the driver; UVC cameras report focal-length-like
            // values whose ratio is the optical zoom. Without a positive minimum, assume 4x.
            (minimum > 0 ? Double(maximum) / Double(minimum) : 4, nil)
        case let .crop(capabilities):
            // Drivers scale by at most 4x; cropping below the output size upscales.
            (
                max(1, min(4 * Double(capabilities.bounds.width) / Double(width), Double(capabilities.bounds.width) / 32)),
                Double(capabilities.bounds.width) / Double(width)
            )
        case .agent:
            (Self.agentMaximumFactor, 1)
        }
    }

    /// The control value for a zoom factor (`.control` only).
    func controlValue(for factor: Double, maximumFactor: Double) -> Int64 {
        guard case let .control(_, minimum, maximum) = self else { return 0 }
        let share = maximumFactor > 1 ? (factor - 1) / (maximumFactor - 1) : 0
        return minimum + Int64((Double(maximum - minimum) * min(max(share, 0), 1)).rounded())
    }
}
