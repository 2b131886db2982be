import FleetCapture
import FleetCore
import FleetRecording
import Foundation
import Testing

@testable import FleetEncoding

/// Cameras deeper than 8 bits through the agent's encoders into real Matroska segments, read
/// back by Debian's ffmpeg and ffprobe (recordings.md, "Deeper pixels"): the synthetic camera's
/// 12-bit ramp, its 10-bit HLG video and its depth scene.
final class DeepPixelEncodingTests {
    let directory: String

    init() throws {
        directory = NSTemporaryDirectory() + "capfleet-deep-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// `count` frames of the synthetic camera's format `fourCC`, at a small size.
    static func frames(_ fourCC: String, width: Int = 320, height: Int = 180, count: Int = 8) throws -> (VideoFormat, [[UInt8]]) {
        var format = try #require(SyntheticCamera.formatList.first { $0.pixelFormat.fourCC == fourCC })
        format.width = width
        format.height = height
        var renderer = TestPatternRenderer(format: format)
        let frames = (0..<count).map { number in
            var bytes = [UInt8](repeating: 0, count: renderer.frameBytes)
            bytes.withUnsafeMutableBytes { renderer.render(frameNumber: UInt32(number), zoom: 1, into: $0.baseAddress!) }
            return bytes
        }
        return (format, frames)
    }

    static func source(_ format: VideoFormat) -> VideoEncoder.Source {
        VideoEncoder.Source(
            pixelFormat: format.pixelFormat.fourCC, width: format.width, height: format.height, frameRate: 30, bitDepth: format.bitDepth,
            colour: format.colour)
    }

    static func words(_ data: Data) -> [UInt16] {
        data.withUnsafeBytes { raw in (0..<raw.count / 2).map { UInt16(raw[$0 * 2]) | UInt16(raw[$0 * 2 + 1]) << 8 } }
    }

    static func probe(_ path: String, _ entries: String) throws -> String {
        try Tool.text("/usr/bin/ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", entries, "-of", "default=nw=1", path])
    }

    @Test func aTwelveBitRamp_survivesFFV1_bitForBit_andSaysItsDepth() throws {
        let (format, frames) = try Self.frames("Y12")
        let ramp = Self.words(Data(frames[0]))
        #expect(Set(ramp.prefix(format.width)).count > 256, "the ramp has more levels than 8 bits hold")
        #expect(ramp.contains { $0 & 0xF != 0 }, "samples use their low bits")
        let path = directory + "/y12.mkv"
        _ = try SegmentFromFrames.record(frames, encoding: TakeEncoding(codec: .ffv1), source: Self.source(format), path: path)
        let decoded = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-map", "0:v", "-f", "rawvideo", "-pix_fmt", "gray12le", "-"])
        #expect(decoded.count == frames.count * frames[0].count, "every frame decodes")
        #expect(Array(decoded) == frames.flatMap { $0 }, "the 12-bit samples come back bit for bit")
        let stream = try Self.probe(path, "stream=codec_name,pix_fmt,color_range,color_transfer:stream_tags=BIT_DEPTH")
        #expect(stream.contains("codec_name=ffv1") && stream.contains("pix_fmt=gray12le"), "\(stream)")
        #expect(stream.contains("color_range=pc") && stream.contains("color_transfer=linear"), "the declared colour is the track's: \(stream)")
        #expect(stream.contains("TAG:BIT_DEPTH=12"), "\(stream)")
    }

    @Test func aTwelveBitRamp_inHEVC_isMain10_withinItsPSNR() throws {
        let (format, frames) = try Self.frames("Y12", width: 640, height: 360, count: 10)
        let path = directory + "/y12-hevc.mkv"
        _ = try SegmentFromFrames.record(frames, encoding: TakeEncoding(codec: .hevc), source: Self.source(format), path: path)
        let stream = try Self.probe(path, "stream=codec_name,profile,pix_fmt:stream_tags=BIT_DEPTH")
        #expect(stream.contains("codec_name=hevc") && stream.contains("profile=Main 10") && stream.contains("pix_fmt=yuv420p10le"), "\(stream)")
        #expect(stream.contains("TAG:BIT_DEPTH=10"), "\(stream)")
        // Luma at 10 bits against the camera's 12-bit samples' top ten.
        let decoded = Self.words(
            try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-map", "0:v", "-f", "rawvideo", "-pix_fmt", "gray10le", "-"]))
        let source = frames.flatMap { Self.words(Data($0)) }.map { $0 >> 2 }
        #expect(decoded.count == source.count)
        let squared = zip(decoded, source).reduce(0.0) { sum, pair in sum + pow(Double(Int(pair.0) - Int(pair.1)), 2) }
        let psnr = 10 * log10(1023.0 * 1023.0 / max(squared / Double(max(source.count, 1)), 1e-9))
        print("12-bit ramp as HEVC Main 10 at crf \(TakeEncoding.defaultQuality): luma PSNR \(String(format: "%.1f", psnr)) dB")
        // Measured 55.9 dB on this machine.
        #expect(psnr >= 48, "HEVC Main 10 keeps the ramp at 48 dB or better: \(psnr)")
    }

    @Test func tenBitHLG_inHEVC_carriesItsColourDescription() throws {
        let (format, frames) = try Self.frames("P010", count: 4)
        #expect(format.colour == .bt2020HLG)
        let path = directory + "/p010.mkv"
        _ = try SegmentFromFrames.record(frames, encoding: TakeEncoding(codec: .hevc), source: Self.source(format), path: path)
        let stream = try Self.probe(path, "stream=profile,pix_fmt,color_range,color_space,color_transfer,color_primaries")
        for expected in [
            "profile=Main 10", "pix_fmt=yuv420p10le", "color_range=tv", "color_space=bt2020nc", "color_transfer=arib-std-b67",
            "color_primaries=bt2020",
        ] {
            #expect(stream.contains(expected), "\(expected) in \(stream)")
        }
        // FFV1 keeps P010's ten bits (its low six are padding) bit for bit.
        let lossless = directory + "/p010-ffv1.mkv"
        _ = try SegmentFromFrames.record(frames, encoding: TakeEncoding(codec: .ffv1), source: Self.source(format), path: lossless)
        let decoded = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", lossless, "-map", "0:v", "-f", "rawvideo", "-pix_fmt", "p010le", "-"])
        #expect(Array(decoded) == frames.flatMap { $0 })
    }

    @Test func depth_isRecordedLosslessly_withItsUnit_andRefusedByLossyCodecs() throws {
        let (format, frames) = try Self.frames("Z16", width: 640, height: 480, count: 3)
        let path = directory + "/z16.mkv"
        _ = try SegmentFromFrames.record(
            frames, encoding: TakeEncoding(codec: .ffv1), source: Self.source(format), path: path, depthUnitMetres: format.depthUnitMetres)
        let depth = Self.words(
            try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-map", "0:v", "-f", "rawvideo", "-pix_fmt", "gray16le", "-"]))
        #expect(depth == frames.flatMap { Self.words(Data($0)) })
        // The known scene: 1000 mm at the top row, 2 mm further each row; the box at 500 mm.
        #expect(depth[600] == 1000 && depth[100 * 640 + 600] == 1200 && depth[400 * 640 + 600] == 1800)
        #expect(depth[240 * 640 + 30] == TestPatternRenderer.depthBoxMillimetres, "frame 0's box is at the left, 0.5 m away")
        #expect(try Self.probe(path, "stream_tags=DEPTH_UNIT_METRES").contains("DEPTH_UNIT_METRES=0.001"))
        for codec in [VideoCodec.h264, .hevc] {
            #expect(throws: EncodingError.depthNeedsLossless(codec: codec)) {
                _ = try VideoEncoder(
                    choice: EncoderChoice.software(for: codec)!, encoding: TakeEncoding(codec: codec), source: Self.source(format), threads: 1,
                    preset: "ultrafast")
            }
        }
        #expect(throws: EncodingError.stabilisationNeedsEightBits(pixelFormat: "Y12")) {
            let (deep, _) = try Self.frames("Y12", count: 1)
            _ = try VideoEncoder(
                choice: EncoderChoice.software(for: .h264)!, encoding: TakeEncoding(codec: .h264, stabilisation: .deshake),
                source: Self.source(deep), threads: 1, preset: "ultrafast")
        }
    }

    @Test func deepCameras_inH264_takeTheirTopEightBits() throws {
        let (format, frames) = try Self.frames("Y12", count: 4)
        let path = directory + "/y12-h264.mkv"
        _ = try SegmentFromFrames.record(frames, encoding: TakeEncoding(codec: .h264, quality: 10), source: Self.source(format), path: path)
        let stream = try Self.probe(path, "stream=pix_fmt")
        // The camera declares full range: x264's full-range 4:2:0 is yuvj420p.
        #expect(stream.contains("pix_fmt=yuvj420p"), "\(stream)")
        let decoded = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-map", "0:v", "-f", "rawvideo", "-pix_fmt", "gray", "-"])
        let source = Self.words(Data(frames[0])).map { UInt8($0 >> 4) }
        // Row 150, below the stamp and the box: within a few levels of the top eight bits.
        let row = 150 * format.width
        let worst = (0..<format.width).map { abs(Int(decoded[row + $0]) - Int(source[row + $0])) }.max() ?? 255
        #expect(worst <= 6, "the ramp's top eight bits, to within \(worst)")
    }

    @Test func aTwelveBitBayerMosaic_isKeptInFFV1_asGreyOfItsDepth_withItsPattern() throws {
        let (width, height) = (64, 32)
        let frames = (0..<3).map { index in
            Self.wordBytes((0..<width * height).map { UInt16(truncatingIfNeeded: ($0 &* 37 &+ index &* 11) & 0xFFF) })
        }
        let path = directory + "/bg12.mkv"
        _ = try SegmentFromFrames.record(
            frames, encoding: TakeEncoding(codec: .ffv1),
            source: VideoEncoder.Source(pixelFormat: "BG12", width: width, height: height, frameRate: 30, bitDepth: 12), path: path)
        let decoded = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-map", "0:v", "-f", "rawvideo", "-pix_fmt", "gray12le", "-"])
        #expect(Array(decoded) == frames.flatMap { $0 }, "the mosaic's samples, bit for bit")
        #expect(try Self.probe(path, "stream_tags=BAYER_PATTERN").contains("BAYER_PATTERN=BGGR"))
        #expect(throws: EncodingError.depthNeedsLossless(codec: .hevc)) {
            _ = try VideoEncoder(
                choice: EncoderChoice.software(for: .hevc)!, encoding: TakeEncoding(codec: .hevc),
                source: VideoEncoder.Source(pixelFormat: "BA81", width: width, height: height, frameRate: 30), threads: 1, preset: "ultrafast")
        }
        #expect(TakeEncoding(codec: .h264).problem(recording: PixelFormat("RG10"), of: "cam-1")?.contains("Bayer") == true)
    }

    static func wordBytes(_ samples: [UInt16]) -> [UInt8] { samples.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] } }

    @Test func rawDeepFrames_areRefusedByTheMuxer_sayingToEncodeThem() throws {
        // FFmpeg's Matroska muxer stores no uncompressed layout deeper than 8 bits: takes encode them.
        for format in [PixelFormat.y12, .y16, .z16, .p010] {
            do {
                _ = try MatroskaSegmentWriter(
                    path: directory + "/raw-\(format).mkv",
                    format: RecordedVideoFormat(pixelFormat: format, width: 64, height: 32, frameRate: 30, bitDepth: 12), title: "raw")
                Issue.record("a raw \(format) track was written")
            } catch {
                #expect("\(error)".contains("--codec ffv1"), "\(error)")
            }
        }
        #expect(TakeEncoding.raw.problem(recording: .y12, of: "cam-1")?.contains("--codec ffv1") == true)
        #expect(TakeEncoding(codec: .hevc).problem(recording: .z16, of: "cam-1")?.contains("--codec-for cam-1=ffv1") == true)
        #expect(TakeEncoding(codec: .hevc).problem(recording: .p010, of: "cam-1") == nil)
        #expect(TakeEncoding(codec: .h264, stabilisation: .deshake).problem(recording: .y10, of: "cam-1")?.contains("--stabilise") == true)
        #expect(TakeEncoding.raw.problem(recording: .yuyv, of: "cam-1") == nil)
    }
}
