import Foundation

/// Finds the synthetic devices' marks in a recorded or exported file with Debian's ffmpeg, the
/// way a user's tools read it (microphones.md, "The synthetic microphone"): the microphone's
/// clicks in a sound track and a flash overlay's lit frames in the picture, each at its time in
/// the file (ns). For tests and benchmarks of sound against picture.
public enum SoundPictureProbe {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Where the clicks start in the file's `audioTrack`th sound track: the first sample at half
    /// of full scale after 10 ms below it (the tone stays at a tenth).
    public static func clicks(in path: String, audioTrack: Int = 0) throws -> [Int64] {
        let first = try firstPacketTime(path, stream: "a:\(audioTrack)")
        let rate = 48_000
        let pcm = try run(
            "/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-map", "0:a:\(audioTrack)", "-ac", "1", "-ar", "\(rate)", "-f", "s16le", "-"])
        let samples = pcm.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        var clicks: [Int64] = []
        var quiet = 0
        for (index, sample) in samples.enumerated() {
            let loud = abs(Int(sample)) > 16_000
            if loud, quiet >= rate / 100 { clicks.append(first + Int64((Double(index) * 1e9 / Double(rate)).rounded())) }
            quiet = loud ? 0 : quiet + 1
        }
        return clicks
    }

    /// The times of the frames whose patch (`crop`, in pixels) is lit, every frame as stored.
    public static func flashes(in path: String, crop: (x: Int, y: Int, width: Int, height: Int)) throws -> [Int64] {
        let times = String(
            decoding: try run(
                "/usr/bin/ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts_time", "-of", "csv=p=0", path]),
            as: UTF8.self
        ).split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }.map { Int64(($0 * 1e9).rounded()) }
        let lumas = [UInt8](
            try run(
                "/usr/bin/ffmpeg",
                [
                    "-v", "error", "-i", path, "-map", "0:v:0", "-fps_mode", "passthrough", "-vf",
                    "crop=\(crop.width):\(crop.height):\(crop.x):\(crop.y),scale=1:1,format=gray", "-f", "rawvideo", "-",
                ]))
        guard times.count == lumas.count else { throw Failure(description: "\(path): \(times.count) frame times but \(lumas.count) frames decoded") }
        return zip(times, lumas).filter { $0.1 > 128 }.map(\.0)
    }

    /// For each click, the nearest flash's time less the click's (negative: the flash came
    /// first); a click with no flash within half a second has none (a frame lost).
    public static func flashAfterClick(clicks: [Int64], flashes: [Int64]) -> [Int64] {
        clicks.compactMap { click in
            flashes.min { abs($0 - click) < abs($1 - click) }.map { $0 - click }.flatMap { abs($0) < 500_000_000 ? $0 : nil }
        }
    }

    /// The first packet's time in the file's `stream` (a:0, v:0), ns.
    public static func firstPacketTime(_ path: String, stream: String) throws -> Int64 {
        let text = String(
            decoding: try run(
                "/usr/bin/ffprobe",
                ["-v", "error", "-select_streams", stream, "-show_entries", "packet=pts_time", "-read_intervals", "%+#1", "-of", "csv=p=0", path]),
            as: UTF8.self)
        guard let seconds = Double(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw Failure(description: "\(path) has no \(stream) packet: \(text)")
        }
        return Int64((seconds * 1e9).rounded())
    }

    private static func run(_ tool: String, _ arguments: [String]) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw Failure(description: "\(tool) \(arguments.joined(separator: " ")) failed") }
        return data
    }
}
