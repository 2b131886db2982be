/// The frame number burned into a synthetic frame's pixels, twice: as a row of 32 black
/// or white blocks that a program reads back (`read`), and as digits a person reads.
/// Survives any lossless path, so a test can prove frames arrive in order end to end.
public enum FrameNumberStamp {
    static let bitCount = 32
    static let origin = 8
    static let white: UInt8 = 235
    static let black: UInt8 = 16

    /// Block edge in pixels: 8 where the frame is wide enough, smaller for tiny frames.
    static func blockSize(width: Int) -> Int { max(2, min(8, (width - 2 * origin) / (bitCount + 2))) }

    public static func write(_ number: UInt32, into luma: LumaPlane) {
        let block = blockSize(width: luma.width)
        // A white-black guard pair before the bits tells a reader the stamp is there.
        luma.fill(x: origin, y: origin, width: block, height: block, value: white)
        luma.fill(x: origin + block, y: origin, width: block, height: block, value: black)
        for bit in 0..<bitCount {
            let isSet = (number >> UInt32(bitCount - 1 - bit)) & 1 == 1
            luma.fill(x: origin + (bit + 2) * block, y: origin, width: block, height: block, value: isSet ? white : black)
        }
        DigitFont.draw(String(number), into: luma, x: origin, y: origin + block + 4, scale: max(1, block / 2))
    }

    /// Reads the number back, or nil when the guard pair is missing (not a stamped frame).
    public static func read(from luma: LumaPlane) -> UInt32? {
        let block = blockSize(width: luma.width)
        let centre = block / 2
        func sample(_ index: Int) -> Bool { luma[origin + index * block + centre, origin + centre] > 128 }
        guard luma.width >= origin + (bitCount + 2) * block, luma.height >= origin + block,
            sample(0), !sample(1)
        else { return nil }
        var number: UInt32 = 0
        for bit in 0..<bitCount where sample(bit + 2) { number |= 1 << UInt32(bitCount - 1 - bit) }
        return number
    }
}

/// A 3x5 pixel digit font, enough to print frame numbers into test patterns.
enum DigitFont {
    static let glyphs: [[UInt8]] = [
        [7, 5, 5, 5, 7], [2, 6, 2, 2, 7], [7, 1, 7, 4, 7], [7, 1, 7, 1, 7], [5, 5, 7, 1, 1],
        [7, 4, 7, 1, 7], [7, 4, 7, 5, 7], [7, 1, 1, 1, 1], [7, 5, 7, 5, 7], [7, 5, 7, 1, 7],
    ]

    static func draw(_ text: String, into luma: LumaPlane, x: Int, y: Int, scale: Int) {
        var cursor = x
        for character in text.utf8 where character >= 48 && character <= 57 {
            let glyph = glyphs[Int(character - 48)]
            luma.fill(x: cursor - scale, y: y - scale, width: 5 * scale, height: 7 * scale, value: FrameNumberStamp.black)
            for (row, bits) in glyph.enumerated() {
                for col in 0..<3 where (bits >> UInt8(2 - col)) & 1 == 1 {
                    luma.fill(x: cursor + col * scale, y: y + row * scale, width: scale, height: scale, value: FrameNumberStamp.white)
                }
            }
            cursor += 4 * scale
        }
    }
}
