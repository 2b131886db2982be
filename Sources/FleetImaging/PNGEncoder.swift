import CZlib

/// Writes RGB pictures as PNG (8-bit truecolour, not interlaced), and deep grey frames as
/// 16-bit greyscale PNG: each row filtered with "Sub" (photographs and test patterns
/// compress better than unfiltered), deflated by zlib, in one IDAT chunk, every chunk with
/// its CRC-32.
public enum PNGEncoder {
    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    public static func encode(_ image: RGBImage, level: Int32 = 6) throws(ImagingError) -> [UInt8] {
        let rowBytes = image.width * 3
        var filtered = [UInt8](repeating: 0, count: (rowBytes + 1) * image.height)
        filtered.withUnsafeMutableBufferPointer { out in
            image.pixels.withUnsafeBufferPointer { pixels in
                for row in 0..<image.height {
                    let line = row * (rowBytes + 1), source = row * rowBytes
                    out[line] = 1  // Sub: each byte minus the byte of the pixel to its left
                    for index in 0..<rowBytes {
                        let left = index >= 3 ? pixels[source + index - 3] : 0
                        out[line + 1 + index] = pixels[source + index] &- left
                    }
                }
            }
        }
        let compressed = try deflate(filtered, level: level)

        var header: [UInt8] = []
        header += bigEndian(UInt32(image.width))
        header += bigEndian(UInt32(image.height))
        header += [8, 2, 0, 0, 0]  // 8 bits a channel, truecolour, deflate, adaptive filtering, no interlace
        var png = signature
        png += chunk("IHDR", header)
        png += chunk("IDAT", compressed)
        png += chunk("IEND", [])
        return png
    }

    /// A 16-bit greyscale PNG (colour type 0) of a frame's samples as cameras send them: one
    /// 16-bit little-endian word per pixel, rows unpadded (Y16). PNG stores samples big-endian,
    /// so the bytes of each word are swapped; the values are kept as they are. A sensor with
    /// fewer bits that puts them in the high bits of the word (a 12-bit sensor's Y16) can say
    /// so with `significantBits`, written as an sBIT chunk so that readers know the rest is
    /// padding. Samples in the low bits (Y10, Y12) must be shifted up first, as PNG requires.
    public static func encodeGrey16(
        width: Int, height: Int, littleEndianSamples samples: UnsafeRawBufferPointer,
        significantBits: Int = 16, level: Int32 = 6
    ) throws(ImagingError) -> [UInt8] {
        precondition((1...16).contains(significantBits), "a 16-bit sample has 1 to 16 significant bits, not \(significantBits)")
        guard width > 0, height > 0, width <= 16384, height <= 16384 else { throw .invalidSize(width: width, height: height) }
        let rowBytes = width * 2
        guard samples.count >= rowBytes * height else {
            throw .payloadTooShort(pixelFormat: "Y16", width: width, height: height, needed: rowBytes * height, got: samples.count)
        }
        var filtered = [UInt8](repeating: 0, count: (rowBytes + 1) * height)
        filtered.withUnsafeMutableBufferPointer { out in
            for row in 0..<height {
                let line = row * (rowBytes + 1), source = row * rowBytes
                out[line] = 1  // Sub, byte by byte against the same byte of the sample to the left
                var previous: (high: UInt8, low: UInt8) = (0, 0)
                for column in 0..<width {
                    let low = samples[source + column * 2], high = samples[source + column * 2 + 1]
                    out[line + 1 + column * 2] = high &- previous.high
                    out[line + 2 + column * 2] = low &- previous.low
                    previous = (high, low)
                }
            }
        }
        let compressed = try deflate(filtered, level: level)
        var header: [UInt8] = []
        header += bigEndian(UInt32(width))
        header += bigEndian(UInt32(height))
        header += [16, 0, 0, 0, 0]  // 16 bits a sample, greyscale, deflate, adaptive filtering, no interlace
        var png = signature
        png += chunk("IHDR", header)
        if significantBits < 16 { png += chunk("sBIT", [UInt8(significantBits)]) }
        png += chunk("IDAT", compressed)
        png += chunk("IEND", [])
        return png
    }

    /// zlib's one-shot deflate of a whole image's filtered rows.
    static func deflate(_ filtered: [UInt8], level: Int32) throws(ImagingError) -> [UInt8] {
        var compressedSize = compressBound(uLong(filtered.count))
        var compressed = [UInt8](repeating: 0, count: Int(compressedSize))
        let status = compressed.withUnsafeMutableBufferPointer { out in
            filtered.withUnsafeBufferPointer { input in
                compress2(out.baseAddress, &compressedSize, input.baseAddress, uLong(input.count), level)
            }
        }
        guard status == Z_OK else { throw .png(call: "compress2", code: status) }
        compressed.removeSubrange(Int(compressedSize)...)
        return compressed
    }

    /// Length, type, data, and the CRC-32 of type and data.
    static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let typeBytes = Array(type.utf8)
        var crc = crc32(0, nil, 0)
        crc = typeBytes.withUnsafeBufferPointer { crc32(crc, $0.baseAddress, uInt($0.count)) }
        crc = data.withUnsafeBufferPointer { crc32(crc, $0.baseAddress, uInt($0.count)) }
        return bigEndian(UInt32(data.count)) + typeBytes + data + bigEndian(UInt32(truncatingIfNeeded: crc))
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }
}
