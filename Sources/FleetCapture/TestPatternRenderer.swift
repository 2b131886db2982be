import FleetCore

/// Draws the synthetic camera's picture: colour bars rendered once per format, then per
/// frame a moving box and the frame number stamp, so each frame costs one memcpy plus a
/// few thousand pixel writes.
struct TestPatternRenderer {
    let layout: FrameLayout
    let frameBytes: Int
    private let background: [UInt8]

    init(format: VideoFormat) {
        layout = FrameLayout(format)
        frameBytes = format.pixelFormat.frameByteCount(width: format.width, height: format.height) ?? 0
        background = Self.colourBars(layout: layout, byteCount: frameBytes)
    }

    /// Seven 75% colour bars (white, yellow, cyan, green, magenta, red, blue) in BT.601 YCbCr.
    private static let bars: [(y: UInt8, u: UInt8, v: UInt8)] = [
        (180, 128, 128), (162, 44, 142), (131, 156, 44), (112, 72, 58), (84, 184, 198), (65, 100, 212), (35, 212, 114),
    ]

    private static func colourBars(layout: FrameLayout, byteCount: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 128, count: byteCount)
        let w = layout.width, h = layout.height
        func bar(_ x: Int) -> (y: UInt8, u: UInt8, v: UInt8) { bars[min(x * bars.count / w, bars.count - 1)] }
        switch layout.pixelFormat {
        case .yuyv:
            var row = [UInt8](repeating: 0, count: w * 2)
            for x in stride(from: 0, to: w, by: 2) {
                let c = bar(x)
                row[x * 2] = c.y; row[x * 2 + 1] = c.u; row[x * 2 + 2] = c.y; row[x * 2 + 3] = c.v
            }
            for y in 0..<h { bytes.replaceSubrange(y * w * 2..<(y + 1) * w * 2, with: row) }
        case .nv12:
            for y in 0..<h { for x in 0..<w { bytes[y * w + x] = bar(x).y } }
            let chromaStart = w * h, chromaWidth = (w + 1) / 2
            for y in 0..<(h + 1) / 2 {
                for cx in 0..<chromaWidth {
                    let c = bar(cx * 2)
                    bytes[chromaStart + y * chromaWidth * 2 + cx * 2] = c.u
                    bytes[chromaStart + y * chromaWidth * 2 + cx * 2 + 1] = c.v
                }
            }
        default:
            break
        }
        return bytes
    }

    func render(frameNumber: UInt32, into storage: UnsafeMutableRawPointer) {
        background.withUnsafeBytes { storage.copyMemory(from: $0.baseAddress!, byteCount: frameBytes) }
        guard let luma = LumaPlane(base: storage, pixelFormat: layout.pixelFormat, width: layout.width, height: layout.height) else { return }
        // A box that crosses the frame every four seconds at 30 fps shows motion at a glance.
        let box = max(16, layout.height / 8)
        let travel = max(1, layout.width - box)
        let x = Int(frameNumber % 120) * travel / 120
        luma.fill(x: x, y: layout.height / 2 - box / 2, width: box, height: box, value: 235)
        FrameNumberStamp.write(frameNumber, into: luma)
    }
}
