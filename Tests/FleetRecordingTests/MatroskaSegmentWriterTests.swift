import FleetCore
import FleetRecording
import Foundation
import Testing

/// Real files, checked with Debian's ffprobe the way a user's player would read them.
final class MatroskaSegmentWriterTests {
    let scratch: ScratchDirectory
    var directory: String { scratch.path }

    init() throws { scratch = try ScratchDirectory("capfleet-mkv") }

    @Test func rawYUYVFrames_playAsUncompressedVideo_atTheirFleetTimestamps_withTheMetadataTrack() throws {
        let path = directory + "/take-cam1-0001.mkv"
        let format = RecordedVideoFormat(pixelFormat: .yuyv, width: 64, height: 48, frameRate: 30)
        let writer = try MatroskaSegmentWriter(path: path, format: format, title: "take 7, cam1")
        // 30 frames a frame interval apart, starting 2.5 ms into the take (a start on a grid slot).
        let interval: UInt64 = 33_333_333
        var frame = [UInt8](repeating: 0x80, count: 64 * 48 * 2)
        for index in 0..<30 {
            frame[0] = UInt8(index)
            try frame.withUnsafeBytes { try writer.appendFrame($0, at: 2_500_000 + UInt64(index) * interval, duration: interval) }
            if index == 10 { try writer.appendMetadata(#"{"kind":"zoom","factor":2.0}"#, at: 2_500_000 + 10 * interval) }
        }
        let summary = try writer.finish()
        #expect(summary.frames == 30 && summary.payloadBytes == 30 * frame.count && summary.metadataEntries == 1)
        #expect(summary.firstTimestamp == 2_500_000 && summary.lastTimestamp == 2_500_000 + 29 * interval)

        let streams = try Self.probe(["-show_entries", "stream=codec_name,codec_type,width,height,pix_fmt", "-of", "csv=p=0", path])
        #expect(streams.contains("rawvideo,video,64,48,yuyv422"), "\(streams)")
        #expect(streams.contains("subrip,subtitle"), "\(streams)")

        let packets = try Self.probe(["-select_streams", "v", "-show_entries", "packet=pts_time", "-of", "csv=p=0", path])
            .split(separator: "\n").compactMap { Double($0) }
        #expect(packets.count == 30)
        // Matroska keeps milliseconds: each frame within half a millisecond of its fleet time.
        for (index, seconds) in packets.enumerated() {
            #expect(abs(seconds - (0.0025 + Double(index) / 30)) <= 0.0005 + 1e-9, "frame \(index) at \(seconds) s")
        }
        let decoded = try Self.probe(["-count_frames", "-select_streams", "v", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path])
        #expect(decoded.trimmingCharacters(in: .whitespacesAndNewlines) == "30")
        let text = try Self.probe(["-select_streams", "s", "-show_entries", "packet=pts_time,data", "-show_data", "-of", "json", path])
        #expect(text.contains("0.336"), "the metadata entry sits at frame 10's time: \(text)")
    }

    /// A burst (three frames within one millisecond) and a clock stepping back: the file's times
    /// still go strictly forward, so ffmpeg copies every frame to a raw stream without an error.
    @Test func framesWithinOneMillisecondOrGoingBack_areStoredStrictlyIncreasing() throws {
        let path = directory + "/burst.mkv"
        let writer = try MatroskaSegmentWriter(
            path: path, format: RecordedVideoFormat(pixelFormat: .yuyv, width: 16, height: 16, frameRate: 15), title: "burst")
        let frame = [UInt8](repeating: 0x80, count: 16 * 16 * 2)
        for at: UInt64 in [0, 66_000_000, 66_200_000, 66_400_000, 40_000_000, 133_000_000] {
            try frame.withUnsafeBytes { try writer.appendFrame($0, at: at, duration: 66_666_667) }
        }
        try writer.finish()
        let packets = try Self.probe(["-select_streams", "v", "-show_entries", "packet=pts", "-of", "csv=p=0", path])
            .split(separator: "\n").compactMap { Int($0) }
        #expect(packets == [0, 66, 67, 68, 69, 133], "\(packets)")
        let copied = try Self.run(
            "/usr/bin/ffmpeg",
            [
                "-v", "error", "-i", path, "-map", "0:v", "-fps_mode", "passthrough", "-enc_time_base", "-1", "-f", "rawvideo", "-y",
                directory + "/burst.yuv",
            ])
        #expect(copied.isEmpty, "\(copied)")
        let size = try FileManager.default.attributesOfItem(atPath: directory + "/burst.yuv")[.size] as? Int
        #expect(size == 6 * frame.count)
    }

    /// Detections arrive after later frames were written: on their own track each still sits at
    /// its frame's time, and the notes track keeps its entries where they happened.
    @Test func detectionsWrittenAfterLaterFrames_sitAtTheirFramesTimes_onTheirOwnTrack() throws {
        let path = directory + "/detections.mkv"
        let writer = try MatroskaSegmentWriter(
            path: path, format: RecordedVideoFormat(pixelFormat: .yuyv, width: 16, height: 16, frameRate: 10), title: "detections")
        let frame = [UInt8](repeating: 0x80, count: 16 * 16 * 2)
        for index in 0..<20 {
            let at = UInt64(index) * 100_000_000
            try frame.withUnsafeBytes { try writer.appendFrame($0, at: at, duration: 100_000_000) }
            if index == 5 { try writer.appendMetadata(#"{"kind":"zoom"}"#, at: at) }
            // Each frame's detection comes three frames late.
            if index >= 3 { try writer.appendMetadata(#"{"kind":"detection","frame":\#(index - 3)}"#, at: at - 300_000_000, track: .detections) }
        }
        let summary = try writer.finish()
        #expect(summary.metadataEntries == 1 && summary.detectionEntries == 17)
        let streams = try Self.probe(["-show_entries", "stream=index,codec_type:stream_tags=title", "-of", "csv=p=0", path])
        #expect(streams.contains("capfleet detections (JSON)") && streams.contains("capfleet timed metadata (JSON)"), "\(streams)")
        let detections = try Self.probe(["-select_streams", "s:1", "-show_entries", "packet=pts", "-of", "csv=p=0", path])
            .split(separator: "\n").compactMap { Int($0) }
        #expect(detections == (0..<17).map { $0 * 100 }, "each at its frame's millisecond: \(detections)")
        let notes = try Self.probe(["-select_streams", "s:0", "-show_entries", "packet=pts", "-of", "csv=p=0", path])
        #expect(notes.trimmingCharacters(in: .whitespacesAndNewlines) == "500")
        let decoded = try Self.probe(["-count_frames", "-select_streams", "v", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path])
        #expect(decoded.trimmingCharacters(in: .whitespacesAndNewlines) == "20")
    }

    @Test func theChecksum_isTheFilesSHA256() throws {
        let path = directory + "/nv12.mkv"
        let writer = try MatroskaSegmentWriter(
            path: path, format: RecordedVideoFormat(pixelFormat: .nv12, width: 32, height: 32, frameRate: 0), title: "nv12")
        let frame = [UInt8](repeating: 16, count: 32 * 32 * 3 / 2)
        for index in 0..<5 { try frame.withUnsafeBytes { try writer.appendFrame($0, at: UInt64(index) * 40_000_000, duration: 40_000_000) } }
        try writer.finish()
        let expected = try Self.run("/usr/bin/sha256sum", [path]).split(separator: " ").first.map(String.init)
        #expect(try SegmentDigest.sha256(ofFile: path) == expected)
        #expect(try Self.probe(["-show_entries", "stream=pix_fmt", "-of", "csv=p=0", "-select_streams", "v", path]).contains("nv12"))
    }

    @Test func mjpegFrames_areStoredAsTheyCame() throws {
        let path = directory + "/mjpeg.mkv"
        let jpeg = BlackJPEG.encode(width: 64, height: 48)
        let writer = try MatroskaSegmentWriter(
            path: path, format: RecordedVideoFormat(pixelFormat: .mjpeg, width: 64, height: 48, frameRate: 15), title: "mjpeg")
        for index in 0..<15 { try jpeg.withUnsafeBytes { try writer.appendFrame($0, at: UInt64(index) * 66_666_667, duration: 66_666_667) } }
        try writer.finish()
        let decoded = try Self.probe([
            "-count_frames", "-select_streams", "v", "-show_entries", "stream=codec_name,nb_read_frames", "-of", "csv=p=0", path,
        ])
        #expect(decoded.trimmingCharacters(in: .whitespacesAndNewlines) == "mjpeg,15", "every JPEG decodes: \(decoded)")
    }

    @Test func aFormatTheFleetCannotRecord_saysWhichItCan() {
        #expect {
            _ = try MatroskaSegmentWriter(
                path: directory + "/x.mkv", format: RecordedVideoFormat(pixelFormat: PixelFormat("Y10"), width: 8, height: 8, frameRate: 1),
                title: "x")
        } throws: { error in
            "\(error)".contains("cannot record Y10") && "\(error)".contains("YUYV")
        }
    }

    @Test func anUnwritableDirectory_isAClearError() {
        #expect {
            _ = try MatroskaSegmentWriter(
                path: directory + "/missing/x.mkv", format: RecordedVideoFormat(pixelFormat: .yuyv, width: 8, height: 8, frameRate: 1), title: "x")
        } throws: { error in
            "\(error)".contains("cannot create") && "\(error)".contains("No such file or directory")
        }
    }

    static func probe(_ arguments: [String]) throws -> String {
        try run("/usr/bin/ffprobe", ["-v", "error"] + arguments)
    }

    static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0 else {
            throw ToolFailure(description: "\(executable) \(arguments.joined(separator: " ")) failed: \(text)")
        }
        return text
    }
}

/// A command-line tool (ffprobe, ffmpeg) that said no.
struct ToolFailure: Error, CustomStringConvertible {
    let description: String
}
