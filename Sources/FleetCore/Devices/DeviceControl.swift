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
