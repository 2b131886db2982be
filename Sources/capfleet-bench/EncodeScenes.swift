import FleetCapture
import FleetCore
import Foundation

/// The pictures the encode benchmark feeds its encoders, 1920x1080 YUYV: the synthetic
/// camera's own pattern (flat bars, a moving box, the frame number: it flatters any codec),
/// and a moving scene that looks like camera footage — soft gradients and textured shapes
/// moving at different speeds under sensor noise that changes every frame.
enum EncodeScenes {
    static let width = 1920, height = 1080

    static func pattern(frames: Int) -> [[UInt8]] {
        var renderer = TestPatternRenderer(
            format: VideoFormat(
                pixelFormat: .yuyv, width: width, height: height,
                frameRateRanges: [FrameRateRange(min: 30, max: 30)]))
        return (0..<frames).map { index in
            var frame = [UInt8](repeating: 0, count: renderer.frameBytes)
            frame.withUnsafeMutableBytes { renderer.render(frameNumber: UInt32(index), zoom: 1, into: $0.baseAddress!) }
            return frame
        }
    }

    static func moving(frames: Int) -> [[UInt8]] {
        // A fixed texture (a seeded "room": blotches of varying brightness), seen through a slow
        // pan, with two objects crossing it and grain of σ ≈ 2 levels on every pixel.
        var random = SeededRandom(seed: 0x5eed)
        let textureWidth = width + 600, textureHeight = height
        var texture = [UInt8](repeating: 0, count: textureWidth * textureHeight)
        let blotches = (0..<400).map { _ in
            (
                x: Double(random.next() % UInt64(textureWidth)), y: Double(random.next() % UInt64(textureHeight)),
                radius: 20 + Double(random.next() % 160), level: 40 + Double(random.next() % 170)
            )
        }
        for y in 0..<textureHeight {
            for x in 0..<textureWidth {
                texture[y * textureWidth + x] = UInt8(clamping: Int(90 + 50 * sin(Double(x) / 310) * cos(Double(y) / 240)))
            }
        }
        for blotch in blotches {
            let r = Int(blotch.radius)
            for y in max(0, Int(blotch.y) - r)..<min(textureHeight, Int(blotch.y) + r) {
                for x in max(0, Int(blotch.x) - r)..<min(textureWidth, Int(blotch.x) + r) {
                    let d = hypot(Double(x) - blotch.x, Double(y) - blotch.y) / blotch.radius
                    guard d < 1 else { continue }
                    let at = y * textureWidth + x
                    texture[at] = UInt8(clamping: Int(Double(texture[at]) * d + blotch.level * (1 - d)))
                }
            }
        }
        return (0..<frames).map { index in
            var frame = [UInt8](repeating: 0, count: width * height * 2)
            let pan = index * 4
            let ball = (x: 200 + index * 21 % (width - 400), y: 300 + Int(200 * sin(Double(index) / 9)))
            let box = (x: width - 300 - index * 13 % (width - 600), y: 650)
            frame.withUnsafeMutableBufferPointer { out in
                for y in 0..<height {
                    let row = y * textureWidth + pan
                    for x in 0..<width {
                        var luma = Int(texture[row + x])
                        let bx = x - ball.x, by = y - ball.y
                        if bx * bx + by * by < 90 * 90 { luma = 200 - (bx * bx + by * by) / 80 }
                        if x >= box.x, x < box.x + 220, y >= box.y, y < box.y + 160 { luma = 60 + ((x / 12 + y / 12) % 2) * 90 }
                        luma += Int(random.next() % 9) - 4
                        let index = (y * width + x) * 2
                        out[index] = UInt8(clamping: luma)
                        out[index + 1] = UInt8(clamping: x % 2 == 0 ? 118 + (x + pan) / 160 % 20 : 134 - y / 120)
                    }
                }
            }
            return frame
        }
    }
}

/// xorshift64*: the same scene in every run.
struct SeededRandom {
    private var state: UInt64
    init(seed: UInt64) { state = seed == 0 ? 1 : seed }
    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 2_685_821_657_736_338_717
    }
}
