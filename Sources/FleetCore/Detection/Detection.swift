/// Machine-readable codes the agent looks for, by the names operators type (`--codes qr,ean13`).
/// ZBar decodes these; it has no Data Matrix (or Aztec) decoder, which is refused by name.
public enum BarcodeSymbology: String, Sendable, CaseIterable, Codable {
    case qr, ean8, ean13, upca, upce, code39, code93, code128, i25, codabar, databar, pdf417

    /// Names people use for the same thing.
    public static func named(_ text: String) -> BarcodeSymbology? {
        let name = String(text.lowercased().filter { $0 != "-" && $0 != "_" && $0 != " " })
        switch name {
        case "qrcode": return .qr
        case "upc": return .upca
        case "itf", "interleaved2of5": return .i25
        case "gs1databar", "rss": return .databar
        default: return BarcodeSymbology(rawValue: name)
        }
    }

    /// Parses `qr,ean13`, refusing names ZBar cannot decode, saying which it can.
    public static func list(_ text: String) -> Result<[BarcodeSymbology], DetectionSettingsError> {
        var chosen: [BarcodeSymbology] = []
        for part in text.split(separator: ",").map({ String($0.filter { $0 != " " }) }) where !part.isEmpty {
            guard let symbology = named(part) else {
                let lowered = part.lowercased()
                if lowered.contains("datamatrix") || lowered == "dm" || lowered == "aztec" {
                    return .failure(.unsupportedSymbology(part, reason: "ZBar, the decoder agents use, has no \(part) decoder"))
                }
                return .failure(.unsupportedSymbology(part, reason: "not a symbology this fleet knows"))
            }
            if !chosen.contains(symbology) { chosen.append(symbology) }
        }
        return .success(chosen)
    }
}

/// A rectangle in normalised frame coordinates: 0,0 the top left, 1,1 the bottom right.
public struct NormalizedRect: Hashable, Sendable, Codable {
    public var x: Double
    public var y: Double
    public var width: Double
    public var height: Double

    public init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    public static let whole = NormalizedRect(x: 0, y: 0, width: 1, height: 1)

    /// `inner`, given in this rectangle's own coordinates, in the coordinates this one is in
    /// (a face found in a window of the view, placed in the whole view).
    public func placing(_ inner: NormalizedRect) -> NormalizedRect {
        NormalizedRect(x: x + inner.x * width, y: y + inner.y * height, width: inner.width * width, height: inner.height * height)
    }

    public var isValid: Bool {
        [x, y, width, height].allSatisfy(\.isFinite) && x >= 0 && y >= 0 && width > 0 && height > 0 && x + width <= 1 + 1e-9 && y + height <= 1 + 1e-9
    }

    public var area: Double { width * height }

    /// Intersection over union: how much two boxes are the same box.
    public func overlap(with other: NormalizedRect) -> Double {
        let left = max(x, other.x), top = max(y, other.y)
        let right = min(x + width, other.x + other.width), bottom = min(y + height, other.y + other.height)
        guard right > left, bottom > top else { return 0 }
        let shared = (right - left) * (bottom - top)
        return shared / (area + other.area - shared)
    }

    /// The pixel rectangle of this region in a `width` x `height` frame, at least one pixel.
    public func pixels(width frameWidth: Int, height frameHeight: Int) -> (x: Int, y: Int, width: Int, height: Int) {
        let left = min(max(Int((x * Double(frameWidth)).rounded(.down)), 0), frameWidth - 1)
        let top = min(max(Int((y * Double(frameHeight)).rounded(.down)), 0), frameHeight - 1)
        let right = min(max(Int(((x + width) * Double(frameWidth)).rounded(.up)), left + 1), frameWidth)
        let bottom = min(max(Int(((y + height) * Double(frameHeight)).rounded(.up)), top + 1), frameHeight)
        return (left, top, right - left, bottom - top)
    }
}

/// What a device's agent looks for in its frames, set by `capfleet detect`.
public struct DetectionSettings: Hashable, Sendable, Codable {
    public var codes: [BarcodeSymbology]
    public var faces: Bool
    /// Only this part of the frame is searched.
    public var region: NormalizedRect
    /// Frames examined a second at most; frames in between are not looked at.
    public var framesPerSecond: Double
    /// Auto-framing from the faces found (detection.md, "Auto-framing"); nil: off.
    public var framing: FramingSettings?

    public static let defaultFramesPerSecond = 5.0
    public static let off = DetectionSettings(codes: [], faces: false)

    public init(
        codes: [BarcodeSymbology], faces: Bool, region: NormalizedRect = .whole, framesPerSecond: Double = defaultFramesPerSecond,
        framing: FramingSettings? = nil
    ) {
        self.framing = framing
        self.codes = codes
        self.faces = faces
        self.region = region
        self.framesPerSecond = framesPerSecond
    }

    public var isOn: Bool { !codes.isEmpty || faces }

    /// Why these settings cannot be taken, or nil.
    public var problem: DetectionSettingsError? {
        if !region.isValid { return .invalidRegion(region) }
        if !framesPerSecond.isFinite || framesPerSecond <= 0 || framesPerSecond > 60 { return .invalidRate(framesPerSecond) }
        if let framing {
            if !faces { return .framingWithoutFaces }
            if let problem = framing.problem { return .invalidFraming(problem) }
        }
        return nil
    }
}

public enum DetectionSettingsError: Error, Sendable, Equatable, CustomStringConvertible {
    case unsupportedSymbology(String, reason: String)
    case invalidRegion(NormalizedRect)
    case invalidRate(Double)
    /// Auto-framing follows faces: it needs face detection on.
    case framingWithoutFaces
    case invalidFraming(String)

    public var description: String {
        switch self {
        case let .unsupportedSymbology(name, reason):
            "cannot look for \(name): \(reason); choose from \(BarcodeSymbology.allCases.map(\.rawValue).joined(separator: ", "))"
        case let .invalidRegion(region):
            "the region \(region.x),\(region.y),\(region.width),\(region.height) is not inside the frame: give x,y,w,h as fractions of the frame (0 to 1), e.g. 0.25,0.25,0.5,0.5"
        case let .invalidRate(rate):
            "a detection rate of \(rate) frames a second is not one the agent takes: give more than 0 and at most 60"
        case .framingWithoutFaces:
            "auto-framing follows the faces found: detect faces too (capfleet framing turns both on)"
        case let .invalidFraming(problem):
            "auto-framing: \(problem)"
        }
    }
}

/// A code found in a frame: what it says and where, its corners in normalised frame
/// coordinates in the decoder's order.
public struct DetectedCode: Hashable, Sendable {
    public var symbology: BarcodeSymbology
    public var value: String
    public var corners: [NormalizedPoint]

    public init(symbology: BarcodeSymbology, value: String, corners: [NormalizedPoint]) {
        self.symbology = symbology
        self.value = value
        self.corners = corners
    }

    /// The smallest rectangle holding every corner.
    public var bounds: NormalizedRect {
        let xs = corners.map(\.x), ys = corners.map(\.y)
        guard let minX = xs.min(), let maxX = xs.max(), let minY = ys.min(), let maxY = ys.max() else {
            return NormalizedRect(x: 0, y: 0, width: 0, height: 0)
        }
        return NormalizedRect(x: minX, y: minY, width: maxX - minX, height: maxY - minY)
    }
}

/// An 8-bit grey picture, rows without padding: what detectors look at.
public struct GreyImage: Sendable {
    public let width: Int
    public let height: Int
    public var pixels: [UInt8]

    public init(width: Int, height: Int, pixels: [UInt8]) {
        precondition(width > 0 && height > 0 && pixels.count == width * height, "a \(width)x\(height) grey image holds \(width * height) bytes")
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    /// The frame's luma, or nil for formats without a luma plane the fleet reads.
    public init?(luma: LumaPlane) {
        width = luma.width
        height = luma.height
        var pixels = [UInt8](repeating: 0, count: luma.width * luma.height)
        pixels.withUnsafeMutableBufferPointer { grey in
            for y in 0..<luma.height {
                luma.read(row: y, into: UnsafeMutableBufferPointer(rebasing: grey[y * luma.width..<(y + 1) * luma.width]))
            }
        }
        self.pixels = pixels
    }

    /// The part of the picture inside `rect` (pixels), as a picture of its own.
    public func cropped(x: Int, y: Int, width w: Int, height h: Int) -> GreyImage {
        var out = [UInt8](repeating: 0, count: w * h)
        for row in 0..<h {
            let source = (y + row) * width + x
            out.replaceSubrange(row * w..<(row + 1) * w, with: pixels[source..<(source + w)])
        }
        return GreyImage(width: w, height: h, pixels: out)
    }
}
