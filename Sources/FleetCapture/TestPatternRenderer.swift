import FleetCore

/// Draws the synthetic camera's picture: colour bars seen through the camera's view (a window
/// of the scene: a centred crop when it zooms, moved where it pans and tilts, as a sensor crop
/// would show; `OpticalView`) and brightened or darkened by the exposure, a moving box, and the
/// frame number stamp. Bars are vertical, so one row is computed per view and exposure gain and
/// copied down the frame: each frame costs about one memcpy plus a few thousand pixel writes.
/// Public so that a take's frames can be checked against the ones the camera made: frame N of
/// the synthetic camera is `render(frameNumber: N)`, at the view and gain it had.
public struct TestPatternRenderer {
    public let layout: FrameLayout
    public let frameBytes: Int
    private var rowsView = NormalizedRect(x: .nan, y: .nan, width: .nan, height: .nan)
    private var rowsGain: Double = .nan
    private var lumaRow: [UInt8] = []  // YUYV: the whole packed row; NV12: the Y row; words' formats: the row's words
    private var chromaRow: [UInt8] = []  // NV12, P010: the interleaved UV row
    /// Pictures drawn into the pattern (SyntheticOverlay.swift).
    public let overlays: [SyntheticOverlay]
    var timecodePainters: [TimecodePainter]?

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

    /// Y12 (a 12-bit machine-vision sensor, linear, full range): a ramp across the frame from
    /// black to the sensor's white, so every column has a sample 8 bits cannot hold; the box
    /// is full white.
    public static func y12Ramp(atColumn x: Int, width: Int, gain: Double) -> UInt16 {
        let level = Double(x) * 4095 / Double(max(width - 1, 1))
        return UInt16(min(max(level * gain, 0), 4095).rounded())
    }

    /// P010 (10-bit BT.2020 HLG, video range): luma a ramp from 64 to 940 across the frame
    /// under the bars' colour (their 8-bit chroma at 10 bits), each sample in the word's top
    /// ten bits.
    public static func p010Luma(atColumn x: Int, width: Int, gain: Double) -> UInt16 {
        let level = 64 + Double(x) * 876 / Double(max(width - 1, 1))
        return UInt16(min(max(64 + (level - 64) * gain, 64), 940).rounded())
    }

    /// Z16's known scene, in millimetres (the format's unit): a plane that recedes from 1 m at
    /// the top row by 2 mm a row, and the moving box 0.5 m from the camera.
    public static func depthMillimetres(atRow y: Int) -> UInt16 { UInt16(clamping: 1000 + 2 * y) }
    public static let depthBoxMillimetres: UInt16 = 500

    /// The bar under column `x` when the pattern is seen through `view`.
    static func bar(atColumn x: Int, width: Int, view: NormalizedRect) -> (y: UInt8, u: UInt8, v: UInt8) {
        let source = view.x * Double(width) + (Double(x) + 0.5) * view.width
        let index = Int((source * Double(bars.count) / Double(width)).rounded(.down))
        return bars[min(max(index, 0), bars.count - 1)]
    }

    /// The window of the scene a camera zoomed by `zoom` (and neither panned nor tilted) shows.
    public static func centredView(zoom: Double) -> NormalizedRect {
        let size = 1 / max(zoom, 1)
        return NormalizedRect(x: (1 - size) / 2, y: (1 - size) / 2, width: size, height: size)
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

    private mutating func prepareRows(view: NormalizedRect, gain: Double) {
        guard view.x != rowsView.x || view.width != rowsView.width || gain != rowsGain else { return }
        rowsView = view
        rowsGain = gain
        let w = layout.width
        switch layout.pixelFormat {
        case .yuyv:
            lumaRow = [UInt8](repeating: 0, count: w * 2)
            for x in stride(from: 0, to: w, by: 2) {
                let left = Self.bar(atColumn: x, width: w, view: view), right = Self.bar(atColumn: x + 1, width: w, view: view)
                lumaRow[x * 2] = Self.luma(left.y, gain: gain)
                lumaRow[x * 2 + 1] = left.u
                if x + 1 < w {
                    lumaRow[x * 2 + 2] = Self.luma(right.y, gain: gain)
                    lumaRow[x * 2 + 3] = left.v
                }
            }
        case .nv12:
            lumaRow = (0..<w).map { Self.luma(Self.bar(atColumn: $0, width: w, view: view).y, gain: gain) }
            let chromaWidth = (w + 1) / 2
            chromaRow = [UInt8](repeating: 128, count: chromaWidth * 2)
            for cx in 0..<chromaWidth {
                let c = Self.bar(atColumn: cx * 2, width: w, view: view)
                chromaRow[cx * 2] = c.u
                chromaRow[cx * 2 + 1] = c.v
            }
        case .y16:
            lumaRow = Self.words((0..<w).map { Self.wideSample(Self.bar(atColumn: $0, width: w, view: view).y, gain: gain) })
        case .y12:
            lumaRow = Self.words((0..<w).map { Self.y12Ramp(atColumn: $0, width: w, gain: gain) })
        case .p010:
            lumaRow = Self.words((0..<w).map { Self.p010Luma(atColumn: $0, width: w, gain: gain) << 6 })
            let chromaWidth = (w + 1) / 2
            chromaRow = Self.words(
                (0..<chromaWidth).flatMap { cx -> [UInt16] in
                    let c = Self.bar(atColumn: cx * 2, width: w, view: view)
                    return [UInt16(c.u) << 8, UInt16(c.v) << 8]  // 8-bit chroma at 10 bits, in the top bits
                })
        default:
            lumaRow = []
        }
    }

    /// Draws frame `frameNumber` seen at `zoom` (centred), exposed `gain` times the nominal
    /// exposure; timecode overlays show `exposureStart` (CLOCK_MONOTONIC ns), and are left out
    /// without it.
    public mutating func render(
        frameNumber: UInt32, zoom: Double, gain: Double = 1, exposureStart: UInt64? = nil, flashLit: Bool = false,
        overlaysShown: Bool = true, into storage: UnsafeMutableRawPointer
    ) {
        render(
            frameNumber: frameNumber, view: Self.centredView(zoom: zoom), gain: gain, exposureStart: exposureStart, flashLit: flashLit,
            overlaysShown: overlaysShown, into: storage)
    }

    /// Draws frame `frameNumber` seen through `view`, a window of the scene (`OpticalView`): the
    /// bars and the pictures in the scene move and grow with it; the box, the stamp, timecodes
    /// and flashes are drawn on the frame itself.
    public mutating func render(
        frameNumber: UInt32, view: NormalizedRect, gain: Double = 1, exposureStart: UInt64? = nil, flashLit: Bool = false,
        overlaysShown: Bool = true, into storage: UnsafeMutableRawPointer
    ) {
        prepareRows(view: view, gain: gain)
        let w = layout.width, h = layout.height
        switch layout.pixelFormat {
        case .yuyv, .y16, .y12:
            lumaRow.withUnsafeBytes { row in
                for y in 0..<h { (storage + y * row.count).copyMemory(from: row.baseAddress!, byteCount: row.count) }
            }
        case .p010:
            lumaRow.withUnsafeBytes { row in
                for y in 0..<h { (storage + y * row.count).copyMemory(from: row.baseAddress!, byteCount: row.count) }
            }
            chromaRow.withUnsafeBytes { row in
                let start = w * h * 2
                for y in 0..<(h + 1) / 2 { (storage + start + y * row.count).copyMemory(from: row.baseAddress!, byteCount: row.count) }
            }
        case .z16:
            for y in 0..<h {
                let depth = Self.depthMillimetres(atRow: y).littleEndian
                let line = storage + y * w * 2
                for x in 0..<w { line.storeBytes(of: depth, toByteOffset: x * 2, as: UInt16.self) }
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
        // Words' formats: the box at full depth, which LumaPlane's 8-bit values cannot reach.
        if let wide = Self.boxWord(layout.pixelFormat) {
            fillWide(storage, x: x, y: h / 2 - box / 2, width: box, height: box, value: wide)
        } else {
            luma.fill(x: x, y: h / 2 - box / 2, width: box, height: box, value: 235)
        }
        if overlaysShown, !overlays.isEmpty {
            drawOverlays(into: luma, frameNumber: frameNumber, view: view, exposureStart: exposureStart, flashLit: flashLit)
        }
        FrameNumberStamp.write(frameNumber, into: luma)
    }

    /// The box's word in the formats of 16-bit samples: white, or its distance for depth.
    static func boxWord(_ format: PixelFormat) -> UInt16? {
        switch format {
        case .y16: wideWhite  // the 12-bit sensor's white, in the high bits
        case .y12: 4095
        case .p010: 940 << 6
        case .z16: depthBoxMillimetres
        default: nil
        }
    }

    static func words(_ samples: [UInt16]) -> [UInt8] { samples.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] } }

    private func fillWide(_ storage: UnsafeMutableRawPointer, x: Int, y: Int, width boxWidth: Int, height boxHeight: Int, value: UInt16) {
        let x0 = max(x, 0), y0 = max(y, 0), x1 = min(x + boxWidth, layout.width), y1 = min(y + boxHeight, layout.height)
        guard x0 < x1, y0 < y1 else { return }
        for row in y0..<y1 {
            let line = row * layout.width * 2
            for column in x0..<x1 { storage.storeBytes(of: value.littleEndian, toByteOffset: line + column * 2, as: UInt16.self) }
        }
    }
}
