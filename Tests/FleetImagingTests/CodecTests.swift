import CZlib
import FleetCore
import Testing

@testable import FleetImaging

/// JPEG through TurboJPEG and back, PNG through an independent reader (its own CRC-32 table,
/// zlib's inflate), the font and the contact sheet's layout.
struct CodecTests {
    static func blocks(width: Int, height: Int, block: Int = 16) -> RGBImage {
        var image = RGBImage(width: width, height: height, filledWith: .black)
        for y in stride(from: 0, to: height, by: block) {
            for x in stride(from: 0, to: width, by: block) {
                image.fill(
                    x: x, y: y, width: block, height: block,
                    with: FrameConversionTests.palette[(x / block + 2 * (y / block)) % FrameConversionTests.palette.count])
            }
        }
        return image
    }

    @Test func jpeg_roundTrip_keepsEveryBlocksColour() throws {
        let image = Self.blocks(width: 320, height: 240)
        let jpeg = try JPEGEncoder().encode(image, quality: 90)
        #expect(jpeg.starts(with: [0xFF, 0xD8]) && jpeg.suffix(2) == [0xFF, 0xD9])
        #expect(jpeg.count < 320 * 240 * 3 / 4, "a preview is small: \(jpeg.count) bytes")
        let decoded = try JPEGDecoder().decode(jpeg)
        #expect(decoded.width == 320 && decoded.height == 240)
        var total = 0
        for y in stride(from: 8, to: 240, by: 16) {
            for x in stride(from: 8, to: 320, by: 16) {
                let error = decoded[x, y].distance(to: image[x, y])
                #expect(error <= 12, "block at (\(x), \(y)): \(decoded[x, y]) against \(image[x, y])")
                total += error
            }
        }
        #expect(total / (20 * 15) <= 4, "mean error \(total / 300)")
    }

    @Test func mjpegFrame_isShrunkWhileDecoding_toThePreviewWidth() throws {
        let image = Self.blocks(width: 1280, height: 960, block: 64)
        let jpeg = try JPEGEncoder().encode(image, quality: 85)
        let picture = try jpeg.withUnsafeBytes { bytes in
            try FrameRenderer().picture(of: RawFrame(bytes: bytes, pixelFormat: .mjpeg, width: 1280, height: 960), width: 320)
        }
        #expect(picture.width == 320 && picture.height == 240)
        #expect(
            picture[8, 8].distance(to: image[32, 32]) <= 12 && picture[40, 24].distance(to: image[160, 96]) <= 12,
            "\(picture[8, 8]) \(picture[40, 24])")
    }

    @Test func blackJPEGOfTheFleet_decodesToBlack() throws {
        let decoded = try JPEGDecoder().decode(BlackJPEG.encode(width: 320, height: 180))
        #expect(decoded.width == 320 && decoded.height == 180)
        #expect(decoded.pixels.allSatisfy { $0 <= 2 })
    }

    @Test func png_hasValidChunks_andInflatesToTheExactPixels() throws {
        let image = Self.blocks(width: 37, height: 23, block: 5)  // odd sizes: no row lines up by luck
        let png = try PNGEncoder.encode(image)
        #expect(Array(png.prefix(8)) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        var offset = 8
        var chunks: [(type: String, data: [UInt8])] = []
        while offset < png.count {
            let length = Int(Self.uint32(png, offset))
            let type = String(decoding: png[offset + 4..<offset + 8], as: UTF8.self)
            let data = Array(png[offset + 8..<offset + 8 + length])
            #expect(Self.uint32(png, offset + 8 + length) == Self.crc32(Array(png[offset + 4..<offset + 8 + length])), "CRC of \(type)")
            chunks.append((type, data))
            offset += 12 + length
        }
        #expect(chunks.map(\.type) == ["IHDR", "IDAT", "IEND"])
        #expect(Self.uint32(chunks[0].data, 0) == 37 && Self.uint32(chunks[0].data, 4) == 23 && Array(chunks[0].data[8...]) == [8, 2, 0, 0, 0])
        var raw = [UInt8](repeating: 0, count: (37 * 3 + 1) * 23)
        var rawSize = uLongf(raw.count)
        let status = chunks[1].data.withUnsafeBufferPointer { compressed in
            uncompress(&raw, &rawSize, compressed.baseAddress, uLong(compressed.count))
        }
        #expect(status == Z_OK && Int(rawSize) == raw.count)
        // Undo each row's filter (the encoder uses Sub; any standard filter is read here).
        var pixels: [UInt8] = []
        let stride = 37 * 3
        for row in 0..<23 {
            let filter = raw[row * (stride + 1)]
            var line = Array(raw[row * (stride + 1) + 1..<(row + 1) * (stride + 1)])
            let above = row > 0 ? Array(pixels[(row - 1) * stride..<row * stride]) : [UInt8](repeating: 0, count: stride)
            for index in 0..<stride {
                let left = index >= 3 ? line[index - 3] : 0
                switch filter {
                case 0: break
                case 1: line[index] = line[index] &+ left
                case 2: line[index] = line[index] &+ above[index]
                default: Issue.record("unexpected filter \(filter)")
                }
            }
            pixels += line
        }
        #expect(pixels == image.pixels)
    }

    @Test func font_drawsEachGlyphsInk_andCutsLongTextWithDots() {
        var image = RGBImage(width: 40, height: 12, filledWith: .black)
        BitmapFont.draw("I-1", into: &image, x: 1, y: 1)
        let ink = image.pixels.enumerated().filter { $0.offset % 3 == 0 && $0.element == 255 }.count
        // "I": 3+1+1+1+1+1+3 = 11 cells, "-": 5, "1": 1+2+1+1+1+1+3 = 10.
        #expect(ink == 26, "\(ink) pixels inked")
        #expect(BitmapFont.width(of: "abc", scale: 2) == 34)
        #expect(BitmapFont.fitting("syn-1234567890", in: 60) == "syn-1234..")
        #expect(BitmapFont.fitting("cam", in: 60) == "cam")
        // Every character of device ids, node names and states has a glyph of its own.
        let needed = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_.:/()%,"
        #expect(needed.allSatisfy { BitmapFont.glyphs[$0] != nil } && BitmapFont.glyphs.values.allSatisfy { $0.count == 7 })
        #expect(Set(BitmapFont.glyphs.values.map { $0 }).count == BitmapFont.glyphs.count, "no two glyphs alike")
    }

    @Test func contactSheet_placesOneTilePerCamera_inANearSquareGrid() {
        let red = RGBImage(width: 320, height: 180, filledWith: RGB(255, 0, 0))
        let tiles = (0..<5).map { index in
            ContactSheet.Tile(
                title: "cam-\(index)", lines: ["node-a", "streaming authorized 15.0 fps"],
                picture: index == 4 ? nil : red)
        }
        let sheet = ContactSheet(tiles: tiles)
        #expect(sheet.layout.columns == 3 && sheet.layout.rows == 2)
        let picture = sheet.render()
        #expect(picture.width == sheet.layout.width && picture.height == sheet.layout.height)
        #expect(sheet.layout.width == 8 + 3 * (320 + 8))
        for index in 0..<4 {
            let (x, y) = sheet.layout.origin(ofTile: index)
            // A 16:9 preview letterboxed in a 4:3 tile: red in the middle, black bars.
            #expect(picture[x + 160, y + 120] == RGB(255, 0, 0) && picture[x + 160, y + 5] == .black, "tile \(index)")
        }
        let (x, y) = sheet.layout.origin(ofTile: 4)
        #expect(picture[x + 5, y + 5] == ContactSheet.emptyPicture, "a camera without a preview gets an empty tile")
        let (sx, sy) = sheet.layout.origin(ofTile: 5)
        #expect(picture[sx + 5, sy + 5] == ContactSheet.background, "no tile past the last camera")
    }

    static func uint32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        bytes[offset..<offset + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    /// CRC-32 (ISO 3309, as PNG uses it), bit by bit: independent of zlib's.
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
