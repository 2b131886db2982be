import FleetCore

/// A raw frame's pixels as a camera sent them: unpadded lines, as frames.md's size table
/// says, so the layout follows from the format and size alone.
public struct RawFrame {
    public let bytes: UnsafeRawBufferPointer
    public let pixelFormat: PixelFormat
    public let width: Int
    public let height: Int

    public init(bytes: UnsafeRawBufferPointer, pixelFormat: PixelFormat, width: Int, height: Int) {
        self.bytes = bytes
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
    }
}

/// Raw camera pixels to RGB, at the frame's own size or smaller. Downscaling averages 2x2
/// samples spread over each output pixel's footprint: it reads a few samples per output
/// pixel, never the whole frame, so a preview of a 4K frame costs what a 320-pixel picture
/// costs. YUV is read as BT.601 limited range (what webcams and the synthetic camera send):
/// Y 16 is black, 235 white. Grey is full range at any depth; deeper than 8 bits (Y10, Y12,
/// Y16) it is shown by its top 8 significant bits, as P010 and P016 are (their signal as it
/// is: an HLG or PQ picture is not tone-mapped). Depth (Z16) is a colour map of the frame's
/// own range of distances, near red to far blue, no reading black. Bayer mosaics (8, 10, 12
/// and 16 bits, every V4L2 order) are demosaiced by their 2x2 cells: each pixel shows its
/// cell's red, the mean of its greens and its blue, by their top eight bits.
public enum FrameConversion {
    /// Raw formats converted here (MJPG and JPEG are decoded by `FrameRenderer`).
    public static let supportedFourCCs = [
        "YUYV", "YVYU", "UYVY", "VYUY", "NV12", "NV21", "YU12", "YV12", "GREY", "Y8",
        "Y10", "Y12", "Y16", "P010", "P016", "Z16", "BA81", "GBRG", "GRBG", "RGGB", "BG10", "GB10", "BA10", "RG10", "BG12",
        "GB12", "BA12", "RG12", "BYR2", "GB16", "GR16", "RG16", "RGB3", "BGR3", "RGB4", "BGR4", "AR24", "XR24", "AB24", "XB24", "BA24", "BX24",
        "RA24", "RX24",
    ]
    private static let supported = Set(supportedFourCCs)

    public static func canConvert(_ format: PixelFormat) -> Bool { supported.contains(format.fourCC) }

    /// The size of a picture `width` pixels wide (at most the frame's own width) with the
    /// frame's aspect, at least 1x1.
    public static func scaledSize(width frameWidth: Int, height frameHeight: Int, toWidth wanted: Int) -> (width: Int, height: Int) {
        let width = max(1, min(wanted, frameWidth))
        let height = max(1, (frameHeight * width + frameWidth / 2) / frameWidth)
        return (width, height)
    }

    /// The frame as an RGB picture of `width` x `height` (the frame's size: every pixel).
    public static func rgb(from frame: RawFrame, width: Int, height: Int) throws(ImagingError) -> RGBImage {
        guard frame.width > 0, frame.height > 0, frame.width <= 16384, frame.height <= 16384 else {
            throw .invalidSize(width: frame.width, height: frame.height)
        }
        guard width > 0, height > 0, width <= 16384, height <= 16384 else { throw .invalidSize(width: width, height: height) }
        let fourCC = frame.pixelFormat.fourCC
        guard supported.contains(fourCC) else { throw .unsupportedPixelFormat(fourCC) }
        let needed = frame.pixelFormat.frameByteCount(width: frame.width, height: frame.height) ?? 0
        guard frame.bytes.count >= needed, let base = frame.bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw .payloadTooShort(pixelFormat: fourCC, width: frame.width, height: frame.height, needed: needed, got: frame.bytes.count)
        }
        let w = frame.width, h = frame.height
        let chromaWidth = (w + 1) / 2, chromaHeight = (h + 1) / 2
        switch fourCC {
        case "YUYV": return resample(PackedYUV422(base: base, stride: chromaWidth * 4, y0: 0, u: 1, y1: 2, v: 3), w, h, width, height)
        case "YVYU": return resample(PackedYUV422(base: base, stride: chromaWidth * 4, y0: 0, u: 3, y1: 2, v: 1), w, h, width, height)
        case "UYVY": return resample(PackedYUV422(base: base, stride: chromaWidth * 4, y0: 1, u: 0, y1: 3, v: 2), w, h, width, height)
        case "VYUY": return resample(PackedYUV422(base: base, stride: chromaWidth * 4, y0: 1, u: 2, y1: 3, v: 0), w, h, width, height)
        case "NV12", "NV21":
            let uFirst = fourCC == "NV12"
            return resample(
                SemiPlanarYUV420(
                    luma: base, stride: w, chroma: base + w * h, chromaStride: chromaWidth * 2,
                    u: uFirst ? 0 : 1, v: uFirst ? 1 : 0), w, h, width, height)
        case "YU12", "YV12":
            let first = base + w * h, second = first + chromaWidth * chromaHeight
            let (u, v) = fourCC == "YU12" ? (first, second) : (second, first)
            return resample(PlanarYUV420(luma: base, stride: w, u: u, v: v, chromaStride: chromaWidth), w, h, width, height)
        case "GREY", "Y8": return resample(Grey(base: base, stride: w), w, h, width, height)
        case "Y10", "Y12", "Y16":
            let bits = frame.pixelFormat.greyWordBits ?? 16
            return resample(GreyWords(base: UnsafeRawPointer(base), stride: w * 2, shift: bits - 8), w, h, width, height)
        case "P010", "P016":
            let raw = UnsafeRawPointer(base)
            return resample(SemiPlanarWords(luma: raw, stride: w * 2, chroma: raw + w * h * 2, chromaStride: chromaWidth * 4), w, h, width, height)
        case _ where frame.pixelFormat.bayer != nil:
            let (pattern, bits) = frame.pixelFormat.bayer!
            return resample(BayerCells(base: UnsafeRawPointer(base), width: w, height: h, pattern: pattern, bits: bits), w, h, width, height)
        case "Z16":
            let raw = UnsafeRawPointer(base)
            let (near, far) = DepthColourMap.range(raw, width: w, height: h)
            return resample(DepthColourMap(base: raw, stride: w * 2, near: near, far: far), w, h, width, height)
        case "RGB3": return resample(PackedRGB(base: base, stride: w * 3, bytesPerPixel: 3, r: 0, g: 1, b: 2), w, h, width, height)
        case "BGR3": return resample(PackedRGB(base: base, stride: w * 3, bytesPerPixel: 3, r: 2, g: 1, b: 0), w, h, width, height)
        // 32-bit formats by byte order in memory (V4L2's pixfmt-rgb): B G R A/X, R G B A/X, A/X R G B, A/X B G R.
        case "BGR4", "AR24", "XR24": return resample(PackedRGB(base: base, stride: w * 4, bytesPerPixel: 4, r: 2, g: 1, b: 0), w, h, width, height)
        case "AB24", "XB24": return resample(PackedRGB(base: base, stride: w * 4, bytesPerPixel: 4, r: 0, g: 1, b: 2), w, h, width, height)
        case "RGB4", "BA24", "BX24": return resample(PackedRGB(base: base, stride: w * 4, bytesPerPixel: 4, r: 1, g: 2, b: 3), w, h, width, height)
        case "RA24", "RX24": return resample(PackedRGB(base: base, stride: w * 4, bytesPerPixel: 4, r: 3, g: 2, b: 1), w, h, width, height)
        default: throw .unsupportedPixelFormat(fourCC)
        }
    }

    /// An RGB picture at another size (contact sheet tiles of previews of any size).
    public static func resized(_ image: RGBImage, width: Int, height: Int) -> RGBImage {
        if image.width == width && image.height == height { return image }
        return image.pixels.withUnsafeBufferPointer { buffer in
            resample(
                PackedRGB(base: buffer.baseAddress!, stride: image.width * 3, bytesPerPixel: 3, r: 0, g: 1, b: 2),
                image.width, image.height, width, height)
        }
    }

    /// Each output pixel is the mean of `n`x`n` samples evenly spread over its footprint
    /// in the source (n = 2 when shrinking by 2 or more, else 1: every pixel as it is).
    static func resample<Source: PixelSource>(
        _ source: Source, _ sourceWidth: Int, _ sourceHeight: Int,
        _ width: Int, _ height: Int
    ) -> RGBImage {
        let n = sourceWidth >= 2 * width && sourceHeight >= 2 * height ? 2 : 1
        func positions(_ count: Int, _ sourceCount: Int) -> [Int] {
            (0..<count * n).map { index in min(sourceCount - 1, (2 * index + 1) * sourceCount / (2 * count * n)) }
        }
        let xs = positions(width, sourceWidth), ys = positions(height, sourceHeight)
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        let samples = n * n, half = samples / 2
        pixels.withUnsafeMutableBufferPointer { out in
            var index = 0
            for row in 0..<height {
                for column in 0..<width {
                    var red = 0, green = 0, blue = 0
                    for dy in 0..<n {
                        let y = ys[row * n + dy]
                        for dx in 0..<n {
                            let sample = source.rgb(xs[column * n + dx], y)
                            red += sample.r
                            green += sample.g
                            blue += sample.b
                        }
                    }
                    out[index] = UInt8((red + half) / samples)
                    out[index + 1] = UInt8((green + half) / samples)
                    out[index + 2] = UInt8((blue + half) / samples)
                    index += 3
                }
            }
        }
        return RGBImage(width: width, height: height, pixels: pixels)
    }
}

/// Reads one source pixel as RGB, 0…255 each.
protocol PixelSource {
    func rgb(_ x: Int, _ y: Int) -> (r: Int, g: Int, b: Int)
}

/// BT.601 limited range to RGB in integers (the usual 8-bit fixed-point coefficients).
@inline(__always)
func limitedRangeRGB(y: UInt8, u: UInt8, v: UInt8) -> (r: Int, g: Int, b: Int) {
    let c = 298 * (Int(y) - 16), d = Int(u) - 128, e = Int(v) - 128
    func clamp(_ value: Int) -> Int { min(255, max(0, (value + 128) >> 8)) }
    return (clamp(c + 409 * e), clamp(c - 100 * d - 208 * e), clamp(c + 516 * d))
}

/// YUYV and its byte orders: two pixels in four bytes, sharing U and V.
struct PackedYUV422: PixelSource {
    let base: UnsafePointer<UInt8>
    let stride: Int
    let y0, u, y1, v: Int

    @inline(__always)
    func rgb(_ x: Int, _ y: Int) -> (r: Int, g: Int, b: Int) {
        let pair = base + y * stride + (x >> 1) * 4
        return limitedRangeRGB(y: pair[x & 1 == 0 ? y0 : y1], u: pair[u], v: pair[v])
    }
}

/// NV12 and NV21: a luma plane, then interleaved chroma at half width and height.
struct SemiPlanarYUV420: PixelSource {
    let luma: UnsafePointer<UInt8>
    let stride: Int
    let chroma: UnsafePointer<UInt8>
    let chromaStride: Int
    let u, v: Int

    @inline(__always)
    func rgb(_ x: Int, _ y: Int) -> (r: Int, g: Int, b: Int) {
        let pair = chroma + (y >> 1) * chromaStride + (x >> 1) * 2
        return limitedRangeRGB(y: luma[y * stride + x], u: pair[u], v: pair[v])
    }
}

/// YU12 (I420) and YV12: three planes, chroma at half width and height.
struct PlanarYUV420: PixelSource {
    let luma: UnsafePointer<UInt8>
    let stride: Int
    let u, v: UnsafePointer<UInt8>
    let chromaStride: Int

    @inline(__always)
    func rgb(_ x: Int, _ y: Int) -> (r: Int, g: Int, b: Int) {
        let chroma = (y >> 1) * chromaStride + (x >> 1)
        return limitedRangeRGB(y: luma[y * stride + x], u: u[chroma], v: v[chroma])
    }
}

/// 8-bit grey, full range.
struct Grey: PixelSource {
    let base: UnsafePointer<UInt8>
    let stride: Int

    @inline(__always)
    func rgb(_ x: Int, _ y: Int) -> (r: Int, g: Int, b: Int) {
        let level = Int(base[y * stride + x])
        return (level, level, level)
    }
}

/// Grey in 16-bit little-endian words with `shift + 8` significant bits from the low end:
/// the top eight of them. A word with bits set above them (a driver's garbage) shows white.
struct GreyWords: PixelSource {
    let base: UnsafeRawPointer
    let stride: Int
    let shift: Int

    @inline(__always)
    func rgb(_ x: Int, _ y: Int) -> (r: Int, g: Int, b: Int) {
        let word = UInt16(littleEndian: base.loadUnaligned(fromByteOffset: y * stride + x * 2, as: UInt16.self))
        let level = min(255, Int(word >> UInt16(shift)))
        return (level, level, level)
    }
}

/// P010 and P016: NV12 in 16-bit little-endian words, the samples in their top bits; shown
/// by the top eight.
struct SemiPlanarWords: PixelSource {
    let luma: UnsafeRawPointer
    let stride: Int
    let chroma: UnsafeRawPointer
    let chromaStride: Int

    @inline(__always)
    func rgb(_ x: Int, _ y: Int) -> (r: Int, g: Int, b: Int) {
        func top(_ pointer: UnsafeRawPointer, _ offset: Int) -> UInt8 {
            UInt8(truncatingIfNeeded: UInt16(littleEndian: pointer.loadUnaligned(fromByteOffset: offset, as: UInt16.self)) >> 8)
        }
        let pair = (y >> 1) * chromaStride + (x >> 1) * 4
        return limitedRangeRGB(y: top(luma, y * stride + x * 2), u: top(chroma, pair), v: top(chroma, pair + 2))
    }
}

/// A Bayer mosaic shown by its 2x2 cells: red, the greens' mean and blue of the cell a pixel is
/// in (at the frame's odd right or bottom edge, the cell before it), by their top eight bits.
struct BayerCells: PixelSource {
    let base: UnsafeRawPointer
    let width: Int
    let height: Int
    /// Offsets within a cell (0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right).
    let red: Int, blue: Int, greens: (Int, Int)
    let bits: Int

    init(base: UnsafeRawPointer, width: Int, height: Int, pattern: String, bits: Int) {
        self.base = base
        self.width = width
        self.height = height
        self.bits = bits
        let letters = Array(pattern)
        red = letters.firstIndex(of: "R") ?? 3
        blue = letters.firstIndex(of: "B") ?? 0
        let green = letters.indices.filter { letters[$0] == "G" }
        greens = (green.first ?? 1, green.last ?? 2)
    }

    @inline(__always)
    func sample(_ position: Int, _ cellX: Int, _ cellY: Int) -> Int {
        let x = min(cellX + (position & 1), width - 1), y = min(cellY + (position >> 1), height - 1)
        if bits == 8 { return Int(base.load(fromByteOffset: y * width + x, as: UInt8.self)) }
        let word = Int(UInt16(littleEndian: base.loadUnaligned(fromByteOffset: (y * width + x) * 2, as: UInt16.self)))
        return min(255, word >> (bits - 8))
    }

    @inline(__always)
    func rgb(_ x: Int, _ y: Int) -> (r: Int, g: Int, b: Int) {
        let cellX = min(x & ~1, max(width - 2, 0)), cellY = min(y & ~1, max(height - 2, 0))
        let green = (sample(greens.0, cellX, cellY) + sample(greens.1, cellX, cellY) + 1) / 2
        return (sample(red, cellX, cellY), green, sample(blue, cellX, cellY))
    }
}

/// Depth in 16-bit words as a colour map from `near` (red) through yellow, green and cyan to
/// `far` (blue); 0, which depth cameras send where they have no reading, is black.
struct DepthColourMap: PixelSource {
    let base: UnsafeRawPointer
    let stride: Int
    let near: Int
    let far: Int

    /// The ramp's 256 colours, red to blue.
    static let ramp: [(r: Int, g: Int, b: Int)] = (0..<256).map { index in
        let t = Double(index) / 255 * 4
        let stops: [(Double, Double, Double)] = [(255, 0, 0), (255, 255, 0), (0, 255, 0), (0, 255, 255), (0, 0, 255)]
        let lower = min(Int(t), 3), fraction = t - Double(lower)
        let a = stops[lower], b = stops[lower + 1]
        func mix(_ p: Double, _ q: Double) -> Int { Int((p + (q - p) * fraction).rounded()) }
        return (mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
    }

    /// The nearest and farthest readings on a 64x64 grid of the frame: what the map spans.
    static func range(_ base: UnsafeRawPointer, width: Int, height: Int) -> (near: Int, far: Int) {
        var near = Int.max, far = 0
        for gy in 0..<64 {
            let y = (2 * gy + 1) * height / 128
            for gx in 0..<64 {
                let x = (2 * gx + 1) * width / 128
                let word = Int(UInt16(littleEndian: base.loadUnaligned(fromByteOffset: (y * width + x) * 2, as: UInt16.self)))
                guard word > 0 else { continue }
                near = min(near, word)
                far = max(far, word)
            }
        }
        return near == Int.max ? (1, 2) : (near, max(far, near + 1))
    }

    @inline(__always)
    func rgb(_ x: Int, _ y: Int) -> (r: Int, g: Int, b: Int) {
        let word = Int(UInt16(littleEndian: base.loadUnaligned(fromByteOffset: y * stride + x * 2, as: UInt16.self)))
        guard word > 0 else { return (0, 0, 0) }
        let index = min(255, max(0, (word - near) * 255 / (far - near)))
        return Self.ramp[index]
    }
}

/// 24- and 32-bit RGB in any byte order.
struct PackedRGB: PixelSource {
    let base: UnsafePointer<UInt8>
    let stride: Int
    let bytesPerPixel: Int
    let r, g, b: Int

    @inline(__always)
    func rgb(_ x: Int, _ y: Int) -> (r: Int, g: Int, b: Int) {
        let pixel = base + y * stride + x * bytesPerPixel
        return (Int(pixel[r]), Int(pixel[g]), Int(pixel[b]))
    }
}
