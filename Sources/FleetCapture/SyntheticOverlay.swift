import FleetCore

/// A grey picture the synthetic camera draws into its pattern's luma, in its scene (so the
/// camera's zoom, pan and tilt move and grow it in the frame): a QR code (`QRCodePicture`) or a
/// photograph of a face, so that detecting codes and faces can be tried and tested without a
/// camera pointed at them; or, on the frame itself, a timecode, a QR code of each frame's
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
    /// A picture that glides across the frame: from `origin.x` to `toX` in `frames` frames, and
    /// back, over and over (a face walking to and fro, for auto-framing); nil: it stays put.
    public var travel: (toX: Double, frames: Int)?

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

    /// How far right of its placement it is on frame `frameNumber`, in pixels of a frame
    /// `frameWidth` wide.
    public func travelOffset(frameNumber: UInt32, frameWidth: Int) -> Int {
        guard let travel, travel.frames > 0 else { return 0 }
        let phase = Int(frameNumber % UInt32(2 * travel.frames))
        let along = Double(phase < travel.frames ? phase : 2 * travel.frames - phase) / Double(travel.frames)
        return Int(((travel.toX - origin.x) * along * Double(frameWidth)).rounded())
    }
}

extension TestPatternRenderer {
    /// Draws the overlays into the frame's luma: pictures where they are in the scene `view`
    /// shows (nearest neighbour, so a code's modules stay sharp; moved and grown with the view),
    /// timecodes with `exposureStart` (none when it is not known), flashes on the frame itself.
    mutating func drawOverlays(
        into luma: LumaPlane, frameNumber: UInt32, view: NormalizedRect, exposureStart: UInt64?, flashLit: Bool = false
    ) {
        if timecodePainters == nil {
            timecodePainters = overlays.compactMap { overlay in
                guard case let .timecode(bootID) = overlay.content else { return nil }
                let place = overlay.placement(frameWidth: layout.width, frameHeight: layout.height)
                return TimecodePainter(bootID: bootID, x: place.x, y: place.y, width: place.width)
            }
        }
        // The scene at the size this view shows it, in this frame's pixels.
        let sceneWidth = Int((Double(layout.width) / view.width).rounded()), sceneHeight = Int((Double(layout.height) / view.height).rounded())
        let left = Int((view.x * Double(sceneWidth)).rounded()), top = Int((view.y * Double(sceneHeight)).rounded())
        for overlay in overlays {
            guard let picture = overlay.image else { continue }
            let place = overlay.placement(frameWidth: sceneWidth, frameHeight: sceneHeight)
            let x = place.x + overlay.travelOffset(frameNumber: frameNumber, frameWidth: sceneWidth) - left, y = place.y - top
            let x0 = max(x, 0), y0 = max(y, 0)
            let x1 = min(x + place.width, layout.width), y1 = min(y + place.height, layout.height)
            guard x0 < x1, y0 < y1 else { continue }
            let columns = (x0..<x1).map { min(($0 - x) * picture.width / place.width, picture.width - 1) }
            for row in y0..<y1 {
                let line = min((row - y) * picture.height / place.height, picture.height - 1) * picture.width
                for (index, column) in (x0..<x1).enumerated() { luma[column, row] = picture.pixels[line + columns[index]] }
            }
        }
        if let exposureStart {
            for index in (timecodePainters ?? []).indices { timecodePainters![index].paint(exposureStart, into: luma) }
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
