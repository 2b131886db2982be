import FleetImaging
import Testing

@Suite struct PNGDecoderTests {
    @Test func theFleetsOwnPNG_readsBackPixelForPixel() throws {
        var pixels: [UInt8] = []
        for y in 0..<37 { for x in 0..<53 { pixels += [UInt8(x * 4 % 256), UInt8(y * 6 % 256), UInt8((x + y) % 256)] } }
        let image = RGBImage(width: 53, height: 37, pixels: pixels)
        #expect(try PNGDecoder.decode(try PNGEncoder.encode(image)) == image)
    }

    @Test func notAPNG_isRefusedSayingWhy() {
        #expect(throws: ImagingError.unreadablePNG("it does not start with the PNG signature")) {
            try PNGDecoder.decode(Array("GIF89a and more bytes".utf8))
        }
    }
}
