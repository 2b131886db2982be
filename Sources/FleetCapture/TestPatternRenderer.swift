import FleetCore

/// Draws the synthetic camera's picture: colour bars seen through the zoom (a centred crop
/// of the pattern, as a sensor crop would show) and brightened or darkened by the exposure,
/// a moving box, and the frame number stamp. Bars are vertical, so one row is computed per
/// zoom factor and exposure gain and copied down the frame: each frame costs about one
/// memcpy plus a few thousand pixel writes. Public so that a take's frames can be checked
/// against the ones the camera made: frame N of the synthetic camera is
/// `render(frameNumber: N)`, at the zoom and gain it had.
public struct TestPatternRenderer {
    public let layout: FrameLayout
    public let frameBytes: Int
    private var rowsZoom: Double = .nan
    private var rowsGain: Double = .nan
    private var lumaRow: [UInt8] = []  // YUYV: the whole packed row; NV12: the Y row; Y16: the row's words
    private var chromaRow: [UInt8] = []  // NV12: the interleaved UV row
    /// Pictures drawn into the pattern (SyntheticOverlay.swift), and them at this layout's size.
    public let overlays: [SyntheticOverlay]
    var scaledOverlays: [(x: Int, y: Int, image: GreyImage)]?
    var timecodePainters: [TimecodePainter] = []

    public init(format: VideoFormat, overlays: [SyntheticOverlay] = []) {
        layout = FrameLayout(format)
        frameBytes = format.pixelFormat.frameByteCount(width: format.width, height: format.height) ?? 0
        self.overlays = overlays
    }

    /// Seven 75% colour bars (white, yellow, cyan, green, magenta, red, blue) in BT.601 YCbCr.
    static let bars: [(y: UInt8, u: UInt8, v: UInt8)] = [
        (180, 128, 128), (162, 44, 142), (131, 156, 44), (112, 72, 58), (84, 184, 198), (65, 100, 212), (35, 212, 114),
    ]

    /// Y16 white: the 12-bit sensor's largest sample, in the high bits of the word.
    static let wideWhite: UInt16 = 4095 << 4

    /// The bar under column `x` when the pattern is seen at `zoom`.
    static func bar(atColumn x: Int, width: Int, zoom: Double) -> (y: UInt8, u: UInt8, v: UInt8) {
        let centre = Double(width) / 2
        let source = (Double(x) + 0.5 - centre) / zoom + centre
        let index = Int((source * Double(bars.count) / Double(width)).rounded(.down))
        return bars[min(max(index, 0), bars.count - 1)]
    }

    /// 8-bit luma `y` exposed `gain` times the nominal exposure: light above black scales,
    /// and clips at video white as a sensor saturates.
    public static func luma(_ y: UInt8, gain: Double) -> UInt8 {
        UInt8(min(max(16 + (Double(y) - 16) * gain, 16), 235).rounded())
    }

    /// The same light as a 12-bit full-range sample in the high bits of a Y16 word.
    public static func wideSample(_ y: UInt8, gain: Double) -> UInt16 {
        UInt16(min(max((Double(y) - 16) * gain / 219 * 4095, 0), 4095).rounded()) << 4
    }

    private mutating func prepareRows(zoom: Double, gain: Double) {
        guard zoom != rowsZoom || gain != rowsGain else { return }
        rowsZoom = zoom
        rowsGain = gain
        let w = layout.width
        switch layout.pixelFormat {
        case .yuyv:
            lumaRow = [UInt8](repeating: 0, count: w * 2)
            for x in stride(from: 0, to: w, by: 2) {
                let left = Self.bar(atColumn: x, width: w, zoom: zoom), right = Self.bar(atColumn: x + 1, width: w, zoom: zoom)
                lumaRow[x * 2] = Self.luma(left.y, gain: gain)
                lumaRow[x * 2 + 1] = left.u
                if x + 1 < w {
                    lumaRow[x * 2 + 2] = Self.luma(right.y, gain: gain)
                    lumaRow[x * 2 + 3] = left.v
                }
            }
        case .nv12:
            lumaRow = (0..<w).map { Self.luma(Self.bar(atColumn: $0, width: w, zoom: zoom).y, gain: gain) }
            let chromaWidth = (w + 1) / 2
            chromaRow = [UInt8](repeating: 128, count: chromaWidth * 2)
            for cx in 0..<chromaWidth {
                let c = Self.bar(atColumn: cx * 2, width: w, zoom: zoom)
                chromaRow[cx * 2] = c.u
                chromaRow[cx * 2 + 1] = c.v
            }
        case .y16:
            lumaRow = [UInt8](repeating: 0, count: w * 2)
            for x in 0..<w {
                let sample = Self.wideSample(Self.bar(atColumn: x, width: w, zoom: zoom).y, gain: gain)
                lumaRow[x * 2] = UInt8(sample & 0xFF)
                lumaRow[x * 2 + 1] = UInt8(sample >> 8)
            }
        default:
            lumaRow = []
        }
    }

    /// Draws frame `frameNumber` seen at `zoom`, exposed `gain` times the nominal exposure;
    /// timecode overlays show `exposureStart` (CLOCK_MONOTONIC ns), and are left out without it.
    public mutating func render(
        frameNumber: UInt32, zoom: Double, gain: Double = 1, exposureStart: UInt64? = nil, flashLit: Bool = false,
        overlaysShown: Bool = true, into storage: UnsafeMutableRawPointer
    ) {
        prepareRows(zoom: zoom, gain: gain)
        let w = layout.width, h = layout.height
        switch layout.pixelFormat {
        case .yuyv, .y16:
            lumaRow.withUnsafeBytes { row in
                for y in 0..<h { (storage + y * row.count).copyMemory(from: row.baseAddress!, byteCount: row.count) }
            }
        case .nv12:
            lumaRow.withUnsafeBytes { row in
                for y in 0..<h { (storage + y * w).copyMemory(from: row.baseAddress!, byteCount: row.count) }
            }
            chromaRow.withUnsafeBytes { row in
                let start = w * h
                for y in 0..<(h + 1) / 2 { (storage + start + y * row.count).copyMemory(from: row.baseAddress!, byteCount: row.count) }
            }
        default:
            storage.initializeMemory(as: UInt8.self, repeating: 128, count: frameBytes)
        }
        guard let luma = LumaPlane(base: storage, pixelFormat: layout.pixelFormat, width: w, height: h) else { return }
        // A box that crosses the frame every four seconds at 30 fps shows motion at a glance.
        let box = max(16, h / 8)
        let travel = max(1, w - box)
        let x = Int(frameNumber % 120) * travel / 120
        if layout.pixelFormat == .y16 {
            // Full white of the 12-bit sample, which LumaPlane's 8-bit values cannot reach.
            fillWide(storage, x: x, y: h / 2 - box / 2, width: box, height: box, value: Self.wideWhite)
        } else {
            luma.fill(x: x, y: h / 2 - box / 2, width: box, height: box, value: 235)
        }
        if overlaysShown, !overlays.isEmpty { drawOverlays(into: luma, exposureStart: exposureStart, flashLit: flashLit) }
        FrameNumberStamp.write(frameNumber, into: luma)
    }

    private func fillWide(_ storage: UnsafeMutableRawPointer, x: Int, y: Int, width boxWidth: Int, height boxHeight: Int, value: UInt16) {
        let x0 = max(x, 0), y0 = max(y, 0), x1 = min(x + boxWidth, layout.width), y1 = min(y + boxHeight, layout.height)
        guard x0 < x1, y0 < y1 else { return }
        for row in y0..<y1 {
            let line = row * layout.width * 2
            for column in x0..<x1 { storage.storeBytes(of: value.littleEndian, toByteOffset: line + column * 2, as: UInt16.self) }
        }
    }
}
