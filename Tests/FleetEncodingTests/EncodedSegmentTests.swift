import FleetCore
import FleetRecording
import Foundation
import Testing

@testable import FleetEncoding

/// The agent's encoders into real Matroska segments, decoded back by Debian's ffmpeg the way
/// a user's tools would read them.
final class EncodedSegmentTests {
    let directory: String

    init() throws {
        directory = NSTemporaryDirectory() + "capfleet-encode-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    @Test func ffv1_decodesToTheCapturedYUYVFrames_bitForBit() throws {
        let frames = (0..<12).map { MovingScene.yuyv(width: 96, height: 64, frame: $0) }
        let path = try record(frames, codec: .ffv1, width: 96, height: 64)
        let decoded = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-map", "0:v", "-f", "rawvideo", "-pix_fmt", "yuyv422", "-"])
        #expect(decoded.count == frames.count * frames[0].count, "every frame decodes")
        for (index, frame) in frames.enumerated() {
            let slice = decoded.subdata(in: index * frame.count..<(index + 1) * frame.count)
            #expect(Array(slice) == frame, "frame \(index) is the captured one, bit for bit")
        }
        let codec = try Tool.text(
            "/usr/bin/ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "stream=codec_name,pix_fmt", "-of", "csv=p=0", path])
        #expect(codec.contains("ffv1,yuv422p"), "\(codec)")
    }

    @Test func ffv1_fromNV12_andGrey_isLosslessToo() throws {
        let nv12 = (0..<4).map { index in (0..<(32 * 32 * 3 / 2)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index &* 13) } }
        let nv12Path = try record(nv12, codec: .ffv1, width: 32, height: 32, pixelFormat: "NV12")
        let nv12Back = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", nv12Path, "-map", "0:v", "-f", "rawvideo", "-pix_fmt", "nv12", "-"])
        #expect(Array(nv12Back) == nv12.flatMap { $0 })
        let grey = (0..<4).map { index in (0..<(32 * 32)).map { UInt8(truncatingIfNeeded: $0 &* 3 &+ index) } }
        let greyPath = try record(grey, codec: .ffv1, width: 32, height: 32, pixelFormat: "GREY")
        let greyBack = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", greyPath, "-map", "0:v", "-f", "rawvideo", "-pix_fmt", "gray", "-"])
        #expect(Array(greyBack) == grey.flatMap { $0 })
    }

    @Test(arguments: [VideoCodec.h264, .hevc])
    func lossyCodecs_decodeEveryFrame_startWithAKeyFrame_andKeepTheAskedGOP(codec: VideoCodec) throws {
        let frames = (0..<20).map { MovingScene.yuyv(width: 128, height: 96, frame: $0) }
        let path = try record(frames, codec: codec, width: 128, height: 96, gop: 5)
        let counted = try Tool.text(
            "/usr/bin/ffprobe",
            [
                "-v", "error", "-count_frames", "-select_streams", "v", "-show_entries", "stream=codec_name,nb_read_frames",
                "-of", "csv=p=0", path,
            ])
        #expect(counted.trimmingCharacters(in: .whitespacesAndNewlines) == "\(codec == .h264 ? "h264" : "hevc"),20", "\(counted)")
        let flags = try Tool.text(
            "/usr/bin/ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=flags", "-of", "csv=p=0", path]
        )
        .split(separator: "\n").map { $0.hasPrefix("K") }
        #expect(flags.count == 20)
        #expect(flags.enumerated().filter(\.element).map(\.offset) == [0, 5, 10, 15], "a key frame every 5 frames: \(flags)")
    }

    @Test func aForcedKeyFrame_isOne() throws {
        let source = VideoEncoder.Source(pixelFormat: "YUYV", width: 64, height: 48, frameRate: 30)
        let encoder = try VideoEncoder(
            choice: EncoderChoice.software(for: .h264)!, encoding: TakeEncoding(codec: .h264, gop: 100), source: source,
            threads: 1, preset: "ultrafast")
        var keys: [Int64] = []
        for index in 0..<10 {
            let frame = MovingScene.yuyv(width: 64, height: 48, frame: index)
            try frame.withUnsafeBytes { bytes in
                try encoder.encode(bytes.baseAddress!, count: bytes.count, frameIndex: Int64(index), forceKey: index == 6) { packet in
                    if packet.isKeyFrame { keys.append(packet.frameIndex) }
                }
            }
        }
        try encoder.drain { packet in if packet.isKeyFrame { keys.append(packet.frameIndex) } }
        #expect(keys == [0, 6])
    }

    @Test func aFormatTheEncoderCannotTake_saysWhatToDo() {
        let source = VideoEncoder.Source(pixelFormat: "RGB3", width: 64, height: 48, frameRate: 30)
        #expect(throws: EncodingError.unsupportedSource(pixelFormat: "RGB3", codec: .ffv1)) {
            _ = try VideoEncoder(
                choice: EncoderChoice.software(for: .ffv1)!, encoding: TakeEncoding(codec: .ffv1), source: source, threads: 1, preset: "ultrafast")
        }
        let odd = VideoEncoder.Source(pixelFormat: "YUYV", width: 63, height: 48, frameRate: 30)
        #expect(throws: EncodingError.unsupportedSize(width: 63, height: 48, codec: .h264)) {
            _ = try VideoEncoder(
                choice: EncoderChoice.software(for: .h264)!, encoding: TakeEncoding(codec: .h264), source: odd, threads: 1, preset: "ultrafast")
        }
    }

    @Test func theCatalog_listsTheSoftwareEncoders_andNoHardwareWhereThereIsNone() {
        let catalog = EncoderCatalog.discover(memoryToMemory: [], renderNodes: [], useHardware: true)
        #expect(catalog.encoders.map(\.name) == ["ffv1", "libx264", "libx265"])
        #expect(catalog.findings.contains { $0.contains("no hardware encoder") })
        #expect(EncoderCatalog.trial(EncoderChoice.software(for: .hevc)!) == nil, "the trial a hardware encoder gets works on one that works")
        let missing = EncoderCatalog.discover(memoryToMemory: [], renderNodes: ["/nonexistent/renderD128"], useHardware: true)
        #expect(missing.encoders.allSatisfy { !$0.isHardware })
        #expect(missing.findings.contains { $0.contains("h264_vaapi on /nonexistent/renderD128 cannot encode here") }, "\(missing.findings)")
    }

    /// Encodes `frames` into one segment the way the agent's part writer does.
    private func record(_ frames: [[UInt8]], codec: VideoCodec, width: Int, height: Int, pixelFormat: String = "YUYV", gop: Int = 0) throws -> String
    {
        let path = directory + "/\(codec.rawValue)-\(pixelFormat).mkv"
        _ = try SegmentFromFrames.record(
            frames, encoding: TakeEncoding(codec: codec, gop: gop),
            source: VideoEncoder.Source(pixelFormat: pixelFormat, width: width, height: height, frameRate: 30), path: path)
        return path
    }
}

/// Frames encoded by the agent's encoder into one Matroska segment, as its part writer does.
enum SegmentFromFrames {
    /// Writes `frames` (30 fps) encoded as `encoding` to `path`, `forceKeys` made key frames;
    /// returns the frames that came out as key frames.
    static func record(
        _ frames: [[UInt8]], encoding: TakeEncoding, source: VideoEncoder.Source, path: String, threads: Int = 2, forceKeys: Set<Int> = [],
        depthUnitMetres: Double? = nil
    ) throws -> [Int64] {
        let encoder = try VideoEncoder(
            choice: EncoderChoice.software(for: encoding.codec)!, encoding: encoding, source: source, threads: threads, preset: "ultrafast")
        let writer = try MatroskaSegmentWriter(
            path: path,
            format: RecordedVideoFormat(
                pixelFormat: PixelFormat(encoding.codec.fourCC), width: source.width, height: source.height, frameRate: 30,
                codecConfig: encoder.codecConfig, sourcePixelFormat: source.pixelFormat, stabilisation: encoding.stabilisation,
                bitDepth: encoder.codedBitDepth,
                colour: source.colour,
                depthUnitMetres: depthUnitMetres),
            title: "test")
        var failure: Error?
        var keys: [Int64] = []
        let write: (VideoEncoder.Packet) -> Void = { packet in
            if packet.isKeyFrame { keys.append(packet.frameIndex) }
            do {
                try writer.appendFrame(packet.bytes, at: UInt64(packet.frameIndex) * 33_333_333, duration: 33_333_333, keyframe: packet.isKeyFrame)
            } catch {
                failure = error
            }
        }
        for (index, frame) in frames.enumerated() {
            try frame.withUnsafeBytes { bytes in
                try encoder.encode(
                    bytes.baseAddress!, count: bytes.count, frameIndex: Int64(index), forceKey: forceKeys.contains(index), deliver: write)
            }
        }
        try encoder.drain(deliver: write)
        if let failure { throw failure }
        try writer.finish()
        return keys
    }
}

/// A picture that moves and has grain: what a camera sees, not a flat pattern.
enum MovingScene {
    static func yuyv(width: Int, height: Int, frame: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: width * height * 2)
        var seed = UInt32(truncatingIfNeeded: frame &* 2_654_435_761 &+ 1)
        for y in 0..<height {
            for x in 0..<width {
                seed = seed &* 1_664_525 &+ 1_013_904_223
                let grain = Int(seed >> 29) - 4
                let luma = (x + frame * 3) % 64 < 32 ? 60 : 190
                let index = (y * width + x) * 2
                bytes[index] = UInt8(clamping: luma + grain + y / 2)
                bytes[index + 1] = UInt8(clamping: x % 2 == 0 ? 100 + frame : 150 - frame)
            }
        }
        return bytes
    }
}

/// Debian's ffmpeg and ffprobe, run as a user would.
enum Tool {
    struct Failure: Error, CustomStringConvertible { let description: String }

    static func run(_ executable: String, _ arguments: [String]) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let said = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure(description: "\(executable) \(arguments.joined(separator: " ")) failed: \(String(decoding: said, as: UTF8.self))")
        }
        return data
    }

    static func text(_ executable: String, _ arguments: [String]) throws -> String { String(decoding: try run(executable, arguments), as: UTF8.self) }
}
