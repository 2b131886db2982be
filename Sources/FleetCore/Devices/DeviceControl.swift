/// A control as the driver reports it (VIDIOC_QUERY_EXT_CTRL): brightness, exposure,
/// zoom, focus and the rest, with its range, default and current value.
public struct DeviceControl: Hashable, Sendable {
    public enum Kind: String, Sendable, CaseIterable {
        case integer, boolean, menu, button, integer64, string, bitmask
        case integerMenu = "integer_menu"
        case other
    }

    public struct MenuItem: Hashable, Sendable {
        public var index: UInt32
        /// The item's name; for integer menus, its value written out.
        public var name: String
        public var value: Int64

        public init(index: UInt32, name: String, value: Int64) {
            self.index = index
            self.name = name
            self.value = value
        }
    }

    public var id: UInt32
    public var name: String
    public var kind: Kind
    public var minimum: Int64
    public var maximum: Int64
    public var step: UInt64
    public var defaultValue: Int64
    /// Nil for controls that have no readable value (buttons, strings, compound controls).
    public var value: Int64?
    public var menu: [MenuItem]
    public var isReadOnly: Bool
    /// The control exists but has no effect now (e.g. manual focus while autofocus runs).
    public var isInactive: Bool

    public init(
        id: UInt32, name: String, kind: Kind, minimum: Int64, maximum: Int64, step: UInt64, defaultValue: Int64,
        value: Int64?, menu: [MenuItem] = [], isReadOnly: Bool = false, isInactive: Bool = false
    ) {
        self.id = id
        self.name = name
        self.kind = kind
        self.minimum = minimum
        self.maximum = maximum
        self.step = step
        self.defaultValue = defaultValue
        self.value = value
        self.menu = menu
        self.isReadOnly = isReadOnly
        self.isInactive = isInactive
    }

    /// V4L2's camera-class pan and tilt (V4L2_CID_PAN_ABSOLUTE, V4L2_CID_TILT_ABSOLUTE), in
    /// arc-seconds, tilt up positive: what auto-framing steers with the zoom (`OpticalView`).
    public static let panAbsoluteID: UInt32 = 0x009a_0908
    public static let tiltAbsoluteID: UInt32 = 0x009a_0909

    /// A value this control can take nearest `value`: inside its range, on its steps.
    public func nearest(_ value: Int64) -> Int64 {
        let inside = min(max(value, minimum), maximum)
        guard step > 1 else { return inside }
        let steps = ((Double(inside - minimum) / Double(step)).rounded())
        return min(minimum + Int64(steps) * Int64(step), maximum)
    }

    /// An id as the docs write it, e.g. `0x00980913`.
    public static func hexadecimal(_ id: UInt32) -> String {
        let digits = String(id, radix: 16)
        return "0x" + String(repeating: "0", count: max(0, 8 - digits.count)) + digits
    }

    /// Why `value` cannot be set on this control, said for the operator; nil when it can.
    public func refusal(of value: Int64) -> String? {
        if isReadOnly { return "\(name) is read-only" }
        switch kind {
        case .menu, .integerMenu:
            guard menu.contains(where: { $0.value == value }) else {
                return "\(value) is not one of \(name)'s items (\(menu.map { "\($0.value)=\($0.name)" }.joined(separator: ", ")))"
            }
        case .integer, .boolean, .integer64, .bitmask:
            guard value >= minimum, value <= maximum else { return "\(value) is outside \(name)'s range \(minimum)…\(maximum)" }
            if step > 1, UInt64(value - minimum) % step != 0 { return "\(value) is not on \(name)'s steps of \(step) from \(minimum)" }
        case .button, .string, .other:
            return "\(name) is a \(kind.rawValue) control, which takes no value here"
        }
        return nil
    }

    /// The control an operator names by its key (`gain_raw`), its name (`Gain (raw)`) or its id
    /// (`0x00980913`, or decimal), any case.
    public static func named(_ word: String, in controls: [DeviceControl]) -> DeviceControl? {
        let lowered = word.lowercased()
        if let control = controls.first(where: { $0.key == lowered || $0.name.lowercased() == lowered }) { return control }
        let id = lowered.hasPrefix("0x") ? UInt32(lowered.dropFirst(2), radix: 16) : UInt32(lowered)
        return id.flatMap { id in controls.first { $0.id == id } }
    }

    /// The value an operator writes: a number, a menu item's name (any case), or for a boolean
    /// `on`/`off`, `true`/`false`; nil when it is none of those.
    public func value(parsing text: String) -> Int64? {
        if let number = Int64(text) { return number }
        let lowered = text.lowercased()
        if let item = menu.first(where: { $0.name.lowercased() == lowered }) { return item.value }
        if kind == .boolean {
            if ["on", "true", "yes"].contains(lowered) { return 1 }
            if ["off", "false", "no"].contains(lowered) { return 0 }
        }
        return nil
    }

    /// The control's name as a short key, e.g. "Focus, Automatic Continuous" → "focus_automatic_continuous".
    public var key: String {
        var key = ""
        for character in name.lowercased() {
            if character.isLetter || character.isNumber { key.append(character) } else if key.last != "_" { key.append("_") }
        }
        while key.last == "_" { key.removeLast() }
        return key
    }
}

/// A rectangle in sensor pixels, as V4L2 selections describe them.
public struct PixelRectangle: Hashable, Sendable {
    public var left: Int
    public var top: Int
    public var width: Int
    public var height: Int

    public init(left: Int, top: Int, width: Int, height: Int) {
        self.left = left
        self.top = top
        self.width = width
        self.height = height
    }

    /// A rectangle of `1/factor` the size of this one, centred in it, with even sizes
    /// and offsets (chroma-subsampled formats need them).
    public func centredCrop(zoomFactor factor: Double) -> PixelRectangle {
        let factor = factor.isFinite ? max(factor, 1) : 1
        let width = max(2, Int((Double(self.width) / factor).rounded()) & ~1)
        let height = max(2, Int((Double(self.height) / factor).rounded()) & ~1)
        return PixelRectangle(
            left: left + ((self.width - width) / 2) & ~1, top: top + ((self.height - height) / 2) & ~1,
            width: width, height: height)
    }
}

/// What the driver says about cropping (VIDIOC_G_SELECTION): the area it can crop from
/// and its default crop. Nil on a device when it cannot crop.
public struct CropCapabilities: Hashable, Sendable {
    public var bounds: PixelRectangle
    public var defaultRectangle: PixelRectangle

    public init(bounds: PixelRectangle, defaultRectangle: PixelRectangle) {
        self.bounds = bounds
        self.defaultRectangle = defaultRectangle
    }
}
