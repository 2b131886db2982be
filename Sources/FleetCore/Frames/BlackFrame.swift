/// What a device sends while its consent is not granted: a frame of the same size and
/// format as its real ones, with every pixel black, so downstream code keeps decoding the
/// stream it expects and never sees a pixel of the scene.
public enum BlackFrame {
    /// The payload of a black frame, or nil for a format the fleet cannot make black
    /// (H.264 and unknown compressed formats: such frames are withheld instead).
    public static func payload(pixelFormat: PixelFormat, width: Int, height: Int) -> [UInt8]? {
        guard width > 0, height > 0 else { return nil }
        if pixelFormat == .mjpeg || pixelFormat.fourCC == "JPEG" {
            return BlackJPEG.encode(width: width, height: height)
        }
        guard let count = pixelFormat.frameByteCount(width: width, height: height) else { return nil }
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { fill($0, pixelFormat: pixelFormat, width: width, height: height) }
        return bytes
    }

    /// Writes black into a raw frame's bytes with whole-word fills: this runs on a capture
    /// thread the first time a format is sent black, and must not cost it a frame.
    public static func fill(_ bytes: UnsafeMutableRawBufferPointer, pixelFormat: PixelFormat, width: Int, height: Int) {
        let lumaBlack: UInt8 = 16, chromaNeutral: UInt8 = 128
        func repeating(_ pattern: [UInt8]) {
            let word = pattern.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
            let words = bytes.count / 4
            bytes.baseAddress!.initializeMemory(as: UInt32.self, repeating: word, count: words)
            for index in words * 4..<bytes.count { bytes[index] = pattern[index % 4] }
        }
        switch pixelFormat.fourCC {
        case "YUYV", "YVYU": repeating([lumaBlack, chromaNeutral, lumaBlack, chromaNeutral])
        case "UYVY", "VYUY": repeating([chromaNeutral, lumaBlack, chromaNeutral, lumaBlack])
        // Bytes A/X, Y, U, V in memory order, and the reverse.
        case "AYUV", "XYUV", "YUV4": repeating([0xFF, lumaBlack, chromaNeutral, chromaNeutral])
        case "VUYA", "VUYX": repeating([chromaNeutral, chromaNeutral, lumaBlack, 0xFF])
        case "NV12", "NV21", "YU12", "YV12", "NV16", "NV61", "422P", "NV24", "NV42":
            let luma = min(width * height, bytes.count)
            bytes.baseAddress!.initializeMemory(as: UInt8.self, repeating: lumaBlack, count: luma)
            (bytes.baseAddress! + luma).initializeMemory(as: UInt8.self, repeating: chromaNeutral, count: bytes.count - luma)
        default:
            // Grey, Bayer and RGB formats: black is zero.
            bytes.baseAddress!.initializeMemory(as: UInt8.self, repeating: 0, count: bytes.count)
        }
    }
}

/// A baseline JPEG whose every pixel is black, of any size: one quantisation table of
/// ones, Huffman tables with just the codes a flat image needs, 4:4:4 YCbCr. Every block
/// after the first is four bits of "no change, end of block" per component.
public enum BlackJPEG {
    public static func encode(width: Int, height: Int) -> [UInt8] {
        precondition(width > 0 && height > 0 && width <= 65535 && height <= 65535)
        var out: [UInt8] = [0xFF, 0xD8]  // SOI
        // DQT: table 0, 8-bit, all ones.
        out += [0xFF, 0xDB, 0x00, 0x43, 0x00] + [UInt8](repeating: 1, count: 64)
        // SOF0: 8-bit, height, width, three components sampled 1x1 on table 0.
        out += [0xFF, 0xC0, 0x00, 0x11, 0x08, UInt8(height >> 8), UInt8(height & 0xFF), UInt8(width >> 8), UInt8(width & 0xFF), 0x03]
        for id in 1...3 { out += [UInt8(id), 0x11, 0x00] }
        // DHT: DC table 0 with categories 0 ("00") and 11 ("01"); AC table 0 with EOB ("00").
        let dcCounts: [UInt8] = [0, 2] + [UInt8](repeating: 0, count: 14)
        out += [0xFF, 0xC4, 0x00, UInt8(2 + 1 + 16 + 2), 0x00] + dcCounts + [0x00, 0x0B]
        let acCounts: [UInt8] = [0, 1] + [UInt8](repeating: 0, count: 14)
        out += [0xFF, 0xC4, 0x00, UInt8(2 + 1 + 16 + 1), 0x10] + acCounts + [0x00]
        // SOS: three components on tables 0/0, full spectral range.
        out += [0xFF, 0xDA, 0x00, 0x0C, 0x03, 0x01, 0x00, 0x02, 0x00, 0x03, 0x00, 0x00, 0x3F, 0x00]

        var bits = BitWriter()
        let blocks = ((width + 7) / 8) * ((height + 7) / 8)
        // First block: luma DC at 0 (level-shifted −128): 8 × −128 = −1024, category 11,
        // written as its ones' complement; then luma EOB, and Cb and Cr each "DC unchanged at
        // 0, EOB".
        bits.write(0b01, count: 2)
        bits.write(UInt32(2047 - 1024), count: 11)
        bits.write(0, count: 2 + 4 + 4)
        // Every other block: twelve zero bits (no change and EOB, three times).
        bits.writeZeros((blocks - 1) * 12)
        out += bits.finish()
        out += [0xFF, 0xD9]  // EOI
        return out
    }

    /// Entropy-coded bits, most significant first, with 0xFF stuffed and the end padded with ones.
    struct BitWriter {
        private(set) var bytes: [UInt8] = []
        private var accumulator: UInt32 = 0
        private var filled = 0

        mutating func write(_ value: UInt32, count: Int) {
            for shift in stride(from: count - 1, through: 0, by: -1) {
                accumulator = accumulator << 1 | (value >> UInt32(shift) & 1)
                filled += 1
                if filled == 8 { emit() }
            }
        }

        /// Zero bits in bulk: whole zero bytes need no stuffing.
        mutating func writeZeros(_ count: Int) {
            var remaining = count
            while filled != 0 && remaining > 0 {
                write(0, count: 1)
                remaining -= 1
            }
            bytes.append(contentsOf: repeatElement(0, count: remaining / 8))
            write(0, count: remaining % 8)
        }

        private mutating func emit() {
            let byte = UInt8(accumulator & 0xFF)
            bytes.append(byte)
            if byte == 0xFF { bytes.append(0x00) }
            accumulator = 0
            filled = 0
        }

        mutating func finish() -> [UInt8] {
            while filled != 0 { write(1, count: 1) }
            return bytes
        }
    }
}
