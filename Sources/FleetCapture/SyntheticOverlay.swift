import FleetCore

/// A grey picture the synthetic camera draws into its pattern's luma, fixed in the frame: a QR
/// code (`QRCodePicture`) or a photograph of a face, so that detecting codes and faces can be
/// tried and tested without a camera pointed at them; or a timecode, a QR code of each frame's
/// own start of exposure (`TimecodePainter`), for exposure audits. Placed by its top-left corner
/// and its width as fractions of the frame (its height keeps its aspect); drawn over the
/// pattern after the moving box, so the stamp and the box stay visible around it.
public struct SyntheticOverlay: Sendable {
    public enum Content: Sendable {
        case picture(GreyImage)
        /// `ExposureTimecode.hostMonotonic` of each frame's true start of exposure, on the
        /// machine `bootID` names (this one).
        case timecode(bootID: String)
        /// A patch lit white on the frame nearest every whole second of fleet time, dark
        /// otherwise: the picture's half of the sound-against-picture check (microphones.md,
        /// "The synthetic microphone": the synthetic microphone clicks on the same seconds).
        case flash
    }

    public let content: Content
    public let origin: NormalizedPoint
    public let width: Double

    public init(image: GreyImage, origin: NormalizedPoint, width: Double) {
        content = .picture(image)
        self.origin = origin
        self.width = width
    }

    public init(timecodeOf bootID: String, origin: NormalizedPoint, width: Double) {
        content = .timecode(bootID: bootID)
        self.origin = origin
        self.width = width
    }

    public init(flashAt origin: NormalizedPoint, width: Double) {
        content = .flash
        self.origin = origin
        self.width = width
    }

    public var isFlash: Bool {
        if case .flash = content { true } else { false }
    }

    /// The picture drawn, nil for a timecode (drawn anew for every frame).
    public var image: GreyImage? {
        if case let .picture(image) = content { image } else { nil }
    }

    /// Where it lands in a `frameWidth` x `frameHeight` frame, in pixels (clipped to the frame).
    public func placement(frameWidth: Int, frameHeight: Int) -> (x: Int, y: Int, width: Int, height: Int) {
        let w = max(1, Int((width * Double(frameWidth)).rounded()))
        let aspect = image.map { Double($0.height) / Double($0.width) } ?? 1
        let h = max(1, Int((Double(w) * aspect).rounded()))
        return (Int((origin.x * Double(frameWidth)).rounded()), Int((origin.y * Double(frameHeight)).rounded()), w, h)
    }

    /// The picture at its size in such a frame (nearest neighbour: a code's modules stay sharp).
    func scaled(_ image: GreyImage, frameWidth: Int, frameHeight: Int) -> (x: Int, y: Int, image: GreyImage) {
        let place = placement(frameWidth: frameWidth, frameHeight: frameHeight)
        var pixels = [UInt8](repeating: 0, count: place.width * place.height)
        for row in 0..<place.height {
            let source = min(row * image.height / place.height, image.height - 1) * image.width
            for column in 0..<place.width {
                pixels[row * place.width + column] = image.pixels[source + min(column * image.width / place.width, image.width - 1)]
            }
        }
        return (place.x, place.y, GreyImage(width: place.width, height: place.height, pixels: pixels))
    }
}

extension TestPatternRenderer {
    /// Draws the overlays, pictures scaled once for this renderer's layout, into the frame's
    /// luma; timecodes show `exposureStart` (none when it is not known).
    mutating func drawOverlays(into luma: LumaPlane, exposureStart: UInt64?, flashLit: Bool = false) {
        if scaledOverlays == nil {
            scaledOverlays = overlays.compactMap { overlay in
                overlay.image.map { overlay.scaled($0, frameWidth: layout.width, frameHeight: layout.height) }
            }
            timecodePainters = overlays.compactMap { overlay in
                guard case let .timecode(bootID) = overlay.content else { return nil }
                let place = overlay.placement(frameWidth: layout.width, frameHeight: layout.height)
                return TimecodePainter(bootID: bootID, x: place.x, y: place.y, width: place.width)
            }
        }
        for overlay in scaledOverlays ?? [] {
            let picture = overlay.image
            let x0 = max(overlay.x, 0), y0 = max(overlay.y, 0)
            let x1 = min(overlay.x + picture.width, layout.width), y1 = min(overlay.y + picture.height, layout.height)
            guard x0 < x1, y0 < y1 else { continue }
            for y in y0..<y1 {
                let line = (y - overlay.y) * picture.width - overlay.x
                for x in x0..<x1 { luma[x, y] = picture.pixels[line + x] }
            }
        }
        if let exposureStart {
            for index in timecodePainters.indices { timecodePainters[index].paint(exposureStart, into: luma) }
        }
        for overlay in overlays where overlay.isFlash {
            let place = overlay.placement(frameWidth: layout.width, frameHeight: layout.height)
            let x0 = max(place.x, 0), y0 = max(place.y, 0)
            let x1 = min(place.x + place.width, layout.width), y1 = min(place.y + place.height, layout.height)
            guard x0 < x1, y0 < y1 else { continue }
            luma.fill(x: x0, y: y0, width: x1 - x0, height: y1 - y0, value: flashLit ? 235 : 16)
        }
    }
}
