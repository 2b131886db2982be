import FleetProtocol
import Testing

@testable import FleetCore

/// The colour description and the formats of 16-bit words (frames.md, "Colour and depth").
struct ColourDescriptionTests {
    @Test func aDescription_goesThroughItsTextAndTheWire_asItWas() {
        for colour in [
            ColourDescription.bt601, .bt709, .bt2020HLG, .bt2020PQ,
            ColourDescription(primaries: .bt709, transfer: .linear, matrix: .bt709, range: .full),
        ] {
            #expect(ColourDescription(colour.description) == colour)
            #expect(ColourDescription(wire: colour.wire) == colour)
        }
        #expect(ColourDescription.bt2020HLG.description == "bt2020/hlg/bt2020/limited")
        #expect(ColourDescription.bt2020HLG.label == "BT.2020 HLG limited")
        #expect(ColourDescription.bt2020HLG.wire.transfer.rawValue == 18, "H.273's code for HLG")
        #expect(ColourDescription.bt2020PQ.wire.transfer.rawValue == 16)
        #expect(ColourDescription("") == nil && ColourDescription("bt2020/hlg/bt2020") == nil && ColourDescription("x/hlg/bt2020/full") == nil)
    }

    @Test func aDescriptionWithAPartUnknown_isNone() {
        var wire = ColourDescription.bt709.wire
        wire.range = .unspecified
        #expect(ColourDescription(wire: wire) == nil)
        var odd = ColourDescription.bt709.wire
        odd.primaries = Capfleet_V1_ColourPrimaries.UNRECOGNIZED(4)
        #expect(ColourDescription(wire: odd) == nil)
    }

    @Test func aFormatsColourAndDepth_travelWithIt() {
        let format = VideoFormat(
            pixelFormat: .z16, width: 640, height: 480, frameRateRanges: [FrameRateRange(min: 1, max: 30)], bitDepth: 16,
            depthUnitMetres: 0.001)
        #expect(VideoFormat(wire: format.wire) == format)
        let hdr = VideoFormat(
            pixelFormat: .p010, width: 1920, height: 1080, frameRateRanges: [FrameRateRange(min: 1, max: 30)], bitDepth: 10,
            colour: .bt2020HLG)
        #expect(VideoFormat(wire: hdr.wire) == hdr)
        #expect(VideoFormat(wire: VideoFormat(pixelFormat: .yuyv, width: 2, height: 2, frameRateRanges: []).wire).colour == nil)
    }

    @Test func wordFormats_haveTheirSizes_andTheirPlayersNames() {
        #expect(PixelFormat.p010.frameByteCount(width: 1920, height: 1080) == 1920 * 1080 * 3)
        #expect(PixelFormat.p016.bytesPerLine(width: 100) == 200)
        #expect(PixelFormat.z16.frameByteCount(width: 640, height: 480) == 640 * 480 * 2)
        #expect(PixelFormat(v4l2Code: PixelFormat("Z16").v4l2Code) == .z16, "V4L2's 'Z16 ' is Z16")
        #expect(
            [PixelFormat.y10, .y12, .y16, .z16, .p010, .p016].map { $0.ffmpegName ?? "-" }
                == ["gray10le", "gray12le", "gray16le", "gray16le", "p010le", "p016le"])
        #expect(PixelFormat.z16.isDepth && !PixelFormat.y16.isDepth && PixelFormat.p010.hasWordSamples && !PixelFormat.nv12.hasWordSamples)
    }

    @Test func theLumaPlane_readsAndWritesEachWordFormat_throughItsTopEightBits() {
        for (format, shift) in [(PixelFormat.y10, 2), (.y12, 4), (.y16, 8), (.z16, 8), (.p010, 8)] {
            var words = [UInt16](repeating: 0, count: 4 * 2)
            words.withUnsafeMutableBytes { raw in
                let luma = LumaPlane(base: raw.baseAddress!, pixelFormat: format, width: 4, height: 2)!
                luma[1, 1] = 200
                #expect(luma[1, 1] == 200)
            }
            #expect(words[5] == UInt16(200) << shift, "\(format): 200 at bit \(shift)")
        }
    }
}
