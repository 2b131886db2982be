import FleetCore
import Testing

@testable import FleetImaging

/// Previews of the formats deeper than 8 bits (frames.md, "Colour and depth"): P010 and P016
/// by their top eight bits, depth as a colour map of the frame's own range.
struct DeepPreviewTests {
    static func words(_ samples: [UInt16]) -> [UInt8] { samples.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] } }

    @Test func p010_showsItsTopEightBits_throughTheBT601Formulas() throws {
        let w = 8, h = 4
        // Luma 10-bit 64 (black) on the left half, 940 (white) on the right; neutral chroma.
        let luma = (0..<w * h).map { UInt16($0 % w < w / 2 ? 64 : 940) << 6 }
        let chroma = [UInt16](repeating: 512 << 6, count: w * h / 2)
        let bytes = Self.words(luma + chroma)
        #expect(bytes.count == PixelFormat.p010.frameByteCount(width: w, height: h))
        let image = try bytes.withUnsafeBytes { raw in
            try FrameConversion.rgb(from: RawFrame(bytes: raw, pixelFormat: .p010, width: w, height: h), width: w, height: h)
        }
        #expect(image.pixels[0] == 0 && image.pixels[1] == 0 && image.pixels[2] == 0, "video black")
        let right = (w - 1) * 3
        #expect(image.pixels[right] == 255 && image.pixels[right + 1] == 255 && image.pixels[right + 2] == 255, "video white")
    }

    @Test func depth_isAColourMap_nearRed_farBlue_noReadingBlack() throws {
        let w = 64, h = 64
        // Near (500 mm) on the top rows, far (3000 mm) on the bottom, no reading in one corner.
        var depth = (0..<w * h).map { UInt16($0 / w < h / 2 ? 500 : 3000) }
        depth[0] = 0
        let bytes = Self.words(depth)
        let image = try bytes.withUnsafeBytes { raw in
            try FrameConversion.rgb(from: RawFrame(bytes: raw, pixelFormat: .z16, width: w, height: h), width: w, height: h)
        }
        func pixel(_ x: Int, _ y: Int) -> [UInt8] { Array(image.pixels[(y * w + x) * 3..<(y * w + x) * 3 + 3]) }
        #expect(pixel(0, 0) == [0, 0, 0], "no reading is black")
        #expect(pixel(10, 10) == [255, 0, 0], "the nearest reading is red")
        #expect(pixel(10, 50) == [0, 0, 255], "the farthest is blue")
        #expect(FrameConversion.canConvert(.z16) && FrameConversion.canConvert(.p016))
    }

    @Test func depth_ofOneDistance_orNone_stillMakesAPicture() throws {
        for value in [UInt16(0), 1234] {
            let bytes = Self.words([UInt16](repeating: value, count: 16 * 16))
            let image = try bytes.withUnsafeBytes { raw in
                try FrameConversion.rgb(from: RawFrame(bytes: raw, pixelFormat: .z16, width: 16, height: 16), width: 8, height: 8)
            }
            #expect(image.width == 8 && image.pixels.count == 8 * 8 * 3)
            #expect(value != 0 || image.pixels.allSatisfy { $0 == 0 })
        }
    }
}

/// The auto-framing crop drawn on a preview (detection.md, "Auto-framing").
struct CropOutlineTests {
    @Test func anOutline_isDrawnOnTheCropsEdges_andLeavesTheInsideAlone() {
        var image = RGBImage(width: 100, height: 50, filledWith: .black)
        image.outline(NormalizedRect(x: 0.2, y: 0.2, width: 0.5, height: 0.5), with: .white, thickness: 2)
        #expect(image[20, 10] == .white && image[21, 11] == .white, "the top-left corner")
        #expect(image[69, 34] == .white, "the bottom-right corner, inside the edge")
        #expect(image[45, 22] == .black, "the inside is the picture's")
        #expect(image[70, 35] == .black && image[19, 9] == .black, "nothing outside it")
        var edge = RGBImage(width: 10, height: 10, filledWith: .black)
        edge.outline(.whole, with: .white)
        #expect(edge[0, 0] == .white && edge[9, 9] == .white, "the whole frame's crop is its border")
    }
}

/// Bayer mosaics previewed by their 2x2 cells, in every V4L2 order and depth.
struct BayerPreviewTests {
    /// A mosaic of `pattern` whose red, green and blue samples are `r`, `g`, `b` (as stored).
    static func mosaic(_ pattern: String, width: Int, height: Int, r: UInt16, g: UInt16, b: UInt16, wide: Bool) -> [UInt8] {
        let letters = Array(pattern)
        var bytes: [UInt8] = []
        for y in 0..<height {
            for x in 0..<width {
                let value: UInt16 =
                    switch letters[(y & 1) * 2 + (x & 1)] {
                    case "R": r
                    case "B": b
                    default: g
                    }
                bytes += wide ? [UInt8(value & 0xFF), UInt8(value >> 8)] : [UInt8(value)]
            }
        }
        return bytes
    }

    @Test(arguments: [
        ("BA81", "BGGR", 8), ("GBRG", "GBRG", 8), ("GRBG", "GRBG", 8), ("RGGB", "RGGB", 8), ("BG10", "BGGR", 10), ("BA10", "GRBG", 10),
        ("RG12", "RGGB", 12), ("GB12", "GBRG", 12), ("BYR2", "BGGR", 16), ("GR16", "GRBG", 16),
    ])
    func aMosaic_isDemosaicedToItsColour(fourCC: String, pattern: String, bits: Int) throws {
        let format = PixelFormat(fourCC)
        #expect(format.bayer?.pattern == pattern && format.bayer?.bits == bits && FrameConversion.canConvert(format))
        let shift = UInt16(bits - 8)
        let (w, h) = (8, 6)
        let bytes = Self.mosaic(pattern, width: w, height: h, r: 200 << shift, g: 100 << shift, b: 40 << shift, wide: bits > 8)
        #expect(bytes.count == format.frameByteCount(width: w, height: h))
        let image = try bytes.withUnsafeBytes { raw in
            try FrameConversion.rgb(from: RawFrame(bytes: raw, pixelFormat: format, width: w, height: h), width: w, height: h)
        }
        for index in stride(from: 0, to: image.pixels.count, by: 3) {
            #expect(Array(image.pixels[index..<index + 3]) == [200, 100, 40], "\(fourCC): pixel \(index / 3)")
        }
    }
}
