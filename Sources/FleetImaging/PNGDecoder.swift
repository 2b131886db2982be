import CZlib

/// Reads the PNGs the fleet writes back into pictures (stills for a contact sheet): 8-bit RGB
/// or RGBA and 8- or 16-bit grey, not interlaced, any of the five row filters. 16-bit samples
/// keep their top 8 bits.
public enum PNGDecoder {
    public static func decode(_ png: [UInt8]) throws(ImagingError) -> RGBImage {
        guard png.count > 8, Array(png[0..<8]) == PNGEncoder.signature else { throw .unreadablePNG("it does not start with the PNG signature") }
        var offset = 8
        var width = 0, height = 0, depth = 0, colour = 0
        var compressed: [UInt8] = []
        while offset + 8 <= png.count {
            let length = Int(UInt32(png[offset]) << 24 | UInt32(png[offset + 1]) << 16 | UInt32(png[offset + 2]) << 8 | UInt32(png[offset + 3]))
            let type = String(decoding: png[(offset + 4)..<(offset + 8)], as: UTF8.self)
            let start = offset + 8
            guard length >= 0, start + length + 4 <= png.count else { throw .unreadablePNG("its \(type) chunk runs past the end of the file") }
            let data = png[start..<(start + length)]
            switch type {
            case "IHDR":
                guard length == 13 else { throw .unreadablePNG("its IHDR chunk is \(length) bytes, not 13") }
                let d = Array(data)
                width = Int(UInt32(d[0]) << 24 | UInt32(d[1]) << 16 | UInt32(d[2]) << 8 | UInt32(d[3]))
                height = Int(UInt32(d[4]) << 24 | UInt32(d[5]) << 16 | UInt32(d[6]) << 8 | UInt32(d[7]))
                depth = Int(d[8])
                colour = Int(d[9])
                guard d[12] == 0 else { throw .unreadablePNG("it is interlaced") }
            case "IDAT":
                compressed += data
            default:
                break
            }
            offset = start + length + 4
            if type == "IEND" { break }
        }
        let channels: Int
        switch (colour, depth) {
        case (0, 8), (0, 16): channels = 1
        case (2, 8): channels = 3
        case (6, 8): channels = 4
        default: throw .unreadablePNG("colour type \(colour) at \(depth) bits is not one the fleet writes")
        }
        guard width > 0, height > 0 else { throw .unreadablePNG("its size is \(width)x\(height)") }
        let bytesPerPixel = channels * depth / 8
        let stride = width * bytesPerPixel
        var raw = [UInt8](repeating: 0, count: (stride + 1) * height)
        var rawSize = uLong(raw.count)
        let status = raw.withUnsafeMutableBufferPointer { out in
            compressed.withUnsafeBufferPointer { input in uncompress(out.baseAddress, &rawSize, input.baseAddress, uLong(input.count)) }
        }
        guard status == Z_OK, Int(rawSize) == raw.count else {
            throw .unreadablePNG("its image data does not inflate to \(width)x\(height) (zlib \(status))")
        }
        // Undo each row's filter, in place, against the row above.
        for row in 0..<height {
            let line = row * (stride + 1)
            let filter = raw[line]
            for index in 0..<stride {
                let at = line + 1 + index
                let left = index >= bytesPerPixel ? Int(raw[at - bytesPerPixel]) : 0
                let up = row > 0 ? Int(raw[at - stride - 1]) : 0
                let upLeft = row > 0 && index >= bytesPerPixel ? Int(raw[at - stride - 1 - bytesPerPixel]) : 0
                let predictor: Int
                switch filter {
                case 0: predictor = 0
                case 1: predictor = left
                case 2: predictor = up
                case 3: predictor = (left + up) / 2
                case 4:
                    let p = left + up - upLeft
                    let (pa, pb, pc) = (abs(p - left), abs(p - up), abs(p - upLeft))
                    predictor = pa <= pb && pa <= pc ? left : pb <= pc ? up : upLeft
                default: throw .unreadablePNG("row \(row) has filter \(filter)")
                }
                raw[at] = raw[at] &+ UInt8(truncatingIfNeeded: predictor)
            }
        }
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        for row in 0..<height {
            let line = row * (stride + 1) + 1
            for x in 0..<width {
                let source = line + x * bytesPerPixel, target = (row * width + x) * 3
                if channels == 1 {
                    let grey = raw[source]  // the top byte of a big-endian 16-bit sample
                    pixels[target] = grey
                    pixels[target + 1] = grey
                    pixels[target + 2] = grey
                } else {
                    pixels[target] = raw[source]
                    pixels[target + 1] = raw[source + 1]
                    pixels[target + 2] = raw[source + 2]
                }
            }
        }
        return RGBImage(width: width, height: height, pixels: pixels)
    }
}
