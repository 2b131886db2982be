import FleetCore
import FleetRecording
import Foundation
import Testing

@testable import FleetEncoding

/// A take's stabilisation (recordings.md, "Stabilisation") through the agent's encoder into a
/// real segment, decoded by Debian's ffmpeg: a textured scene shaken by a few pixels a frame
/// comes out steadier than it went in, every frame still there, key frames where they were
/// asked, and the file says it was steadied.
final class StabilisedEncodingTests {
    let directory: String
    static let width = 320, height = 240

    init() throws {
        directory = NSTemporaryDirectory() + "capfleet-stabilise-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    @Test func aShakenScene_comesOutSteadier_everyFrameThere_andTheFileSaysSo() throws {
        let frames = (0..<40).map { ShakenScene.yuyv(width: Self.width, height: Self.height, frame: $0) }
        let plain = try record(frames, stabilisation: .off, name: "plain")
        let steadied = try record(frames, stabilisation: .deshake, name: "steadied")
        let shaken = try Self.meanFrameToFrameDifference(plain.path)
        let steady = try Self.meanFrameToFrameDifference(steadied.path)
        print("stabilisation: frame-to-frame difference \(shaken) unsteadied, \(steady) steadied by deshake")
        #expect(steady < shaken * 0.5, "deshake halves the shake at least: \(steady) against \(shaken)")
        #expect(steadied.keys == [0, 20], "key frames where they were asked: \(steadied.keys)")
        let counted = try Tool.text(
            "/usr/bin/ffprobe",
            [
                "-v", "error", "-count_frames", "-select_streams", "v", "-show_entries", "stream=nb_read_frames:stream_tags=STABILISATION", "-of",
                "csv=p=0", steadied.path,
            ])
        #expect(counted.trimmingCharacters(in: .whitespacesAndNewlines) == "40,deshake", "\(counted)")
        let unmarked = try Tool.text(
            "/usr/bin/ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "stream_tags=STABILISATION", "-of", "csv=p=0", plain.path])
        #expect(unmarked.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(unmarked)")
    }

    @Test func stabilisation_isRefused_forCodecsThatKeepTheCamerasPixels() {
        let source = VideoEncoder.Source(pixelFormat: "YUYV", width: 64, height: 48, frameRate: 30)
        #expect(throws: EncodingError.unsupportedStabilisation(codec: .ffv1)) {
            _ = try VideoEncoder(
                choice: EncoderChoice.software(for: .ffv1)!, encoding: TakeEncoding(codec: .ffv1, stabilisation: .deshake), source: source,
                threads: 1, preset: "ultrafast")
        }
        #expect(TakeEncoding(codec: .ffv1, stabilisation: .deshake).problem?.contains("--stabilise is for h264 and hevc") == true)
        #expect(TakeEncoding(codec: .raw, stabilisation: .deshake).problem?.contains("raw") == true)
        #expect(TakeEncoding(codec: .hevc, stabilisation: .deshake).problem == nil)
        #expect(TakeEncoding(codec: .h264, stabilisation: .deshake).summary == "h264, crf 23, stabilised (deshake)")
    }

    /// The mean absolute difference of each decoded frame's middle (the edges a shift
    /// uncovers left out) from the frame before, in grey levels.
    static func meanFrameToFrameDifference(_ path: String) throws -> Double {
        let grey = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-map", "0:v", "-f", "rawvideo", "-pix_fmt", "gray", "-"])
        let bytes = [UInt8](grey)
        let size = width * height
        let count = bytes.count / size
        var total = 0.0
        var samples = 0
        for index in 1..<count {
            for y in 32..<(height - 32) {
                for x in 32..<(width - 32) {
                    total += Double(abs(Int(bytes[index * size + y * width + x]) - Int(bytes[(index - 1) * size + y * width + x])))
                    samples += 1
                }
            }
        }
        return total / Double(max(samples, 1))
    }

    private func record(_ frames: [[UInt8]], stabilisation: VideoStabilisation, name: String) throws -> (path: String, keys: [Int64]) {
        let path = directory + "/\(name).mkv"
        let keys = try SegmentFromFrames.record(
            frames, encoding: TakeEncoding(codec: .h264, quality: 12, gop: 100, stabilisation: stabilisation),
            source: VideoEncoder.Source(pixelFormat: "YUYV", width: Self.width, height: Self.height, frameRate: 30), path: path, threads: 1,
            forceKeys: [20])
        return (path, keys)
    }
}

/// A still, textured scene seen by a camera that shakes: each frame the whole picture is moved
/// by a few pixels (a fixed pseudo-random walk around its place, up to ±6 each way).
enum ShakenScene {
    static func shift(frame: Int) -> (x: Int, y: Int) {
        var state = UInt64(truncatingIfNeeded: frame &* 2_654_435_761 &+ 97)
        state ^= state >> 13
        state = state &* 0x9E37_79B9_7F4A_7C15
        return (Int(state % 13) - 6, Int((state >> 20) % 13) - 6)
    }

    /// Blocks of 8 pixels, each its own grey, from a hash of where it is in the scene.
    static func luma(_ x: Int, _ y: Int) -> UInt8 {
        var hash = UInt32(truncatingIfNeeded: (x >> 3) &* 73_856_093 ^ (y >> 3) &* 19_349_663)
        hash ^= hash >> 15
        hash = hash &* 0x2C1B_3C6D
        return UInt8(40 + (hash >> 24) % 176)
    }

    static func yuyv(width: Int, height: Int, frame: Int) -> [UInt8] {
        let (dx, dy) = shift(frame: frame)
        var bytes = [UInt8](repeating: 128, count: width * height * 2)
        for y in 0..<height {
            for x in 0..<width { bytes[(y * width + x) * 2] = luma(x + dx + 64, y + dy + 64) }
        }
        return bytes
    }
}
