import CZlib

/// Writes RGB pictures as PNG (8-bit truecolour, not interlaced): each row filtered with
/// "Sub" (photographs and test patterns compress better than unfiltered), deflated by zlib,
/// in one IDAT chunk, every chunk with its CRC-32.
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
        var compressedSize = compressBound(uLong(filtered.count))
        var compressed = [UInt8](repeating: 0, count: Int(compressedSize))
        let status = compressed.withUnsafeMutableBufferPointer { out in
            filtered.withUnsafeBufferPointer { input in
                compress2(out.baseAddress, &compressedSize, input.baseAddress, uLong(input.count), level)
            }
        }
        guard status == Z_OK else { throw .png(call: "compress2", code: status) }
        compressed.removeSubrange(Int(compressedSize)...)

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
