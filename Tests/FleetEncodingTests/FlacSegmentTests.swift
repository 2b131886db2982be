import FleetCore
import FleetRecording
import Foundation
import Testing

@testable import FleetEncoding

/// A microphone's take part (microphones.md, "In takes"): 10 ms FLAC frames into a real
/// Matroska segment, decoded back by Debian's ffmpeg bit for bit, each block at its time.
final class FlacSegmentTests {
    let directory: String

    init() throws {
        directory = NSTemporaryDirectory() + "capfleet-flac-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    @Test func tenMillisecondFlacBlocks_decodeToTheCapturedSamples_bitForBit_atTheirTimes() throws {
        let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16le)
        let encoder = try FlacEncoder(format: format, blockFrames: 480)
        #expect(encoder.codecConfig.count >= 34, "STREAMINFO for the track's CodecPrivate")
        let path = directory + "/mic-0001.mkv"
        let writer = try MatroskaSegmentWriter(
            path: path,
            format: RecordedVideoFormat(
                pixelFormat: PixelFormat(RecordedVideoFormat.flacFourCC), width: 0, height: 0, frameRate: 100, codecConfig: encoder.codecConfig,
                encoder: FlacEncoder.encoderName, audio: format),
            title: "test")
        // A second of the synthetic tone and its click, with some noise: what a microphone hears.
        let tone = SyntheticTone(format: format)
        var all: [Int16] = []
        var seed: UInt32 = 7
        var sizes: [Int] = []
        for block in 0..<100 {
            var samples: [Int16] = []
            tone.render(into: &samples, frames: 480, index: UInt64(block * 480), fleetNs: 5_000_000_000 + UInt64(block) * 10_000_000)
            for index in samples.indices {
                seed = seed &* 1_664_525 &+ 1_013_904_223
                samples[index] = samples[index] &+ Int16(Int(seed >> 28) - 8)
            }
            all += samples
            var failure: Error?
            try samples.withUnsafeBufferPointer { buffer in
                try encoder.encode(buffer, frames: 480) { packet in
                    sizes.append(packet.count)
                    do { try writer.appendFrame(packet, at: UInt64(block) * 10_000_000, duration: 10_000_000) } catch { failure = error }
                }
            }
            if let failure { throw failure }
        }
        try writer.finish()
        #expect(sizes.count == 100, "one FLAC frame a block, at once")
        #expect(sizes.reduce(0, +) < all.count * 2 / 2, "lossless and smaller than half the raw \(all.count * 2) bytes: \(sizes.reduce(0, +))")

        let probe = try Tool.text(
            "/usr/bin/ffprobe",
            ["-v", "error", "-select_streams", "a", "-show_entries", "stream=codec_name,sample_rate,channels", "-of", "csv=p=0", path])
        #expect(probe.trimmingCharacters(in: .whitespacesAndNewlines) == "flac,48000,2")
        let decoded = try Tool.run("/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-map", "0:a", "-f", "s16le", "-"])
        let samples = decoded.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        #expect(samples == all, "every sample as captured")
        let times = try Tool.text(
            "/usr/bin/ffprobe", ["-v", "error", "-select_streams", "a", "-show_entries", "packet=pts_time", "-of", "csv=p=0", path]
        )
        .split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        #expect(times.count == 100 && times.enumerated().allSatisfy { abs($0.element - Double($0.offset) * 0.01) < 0.0005 }, "\(times.prefix(5))")
    }
}
