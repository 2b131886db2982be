import Foundation

/// A recorded segment's timed metadata as a player sees it: ffmpeg reads one subtitle track of
/// the Matroska file as SubRip, each entry a JSON line at its time (recordings.md, "Timed
/// metadata"). Track 0 holds markers, events and notes, 1 detections, 2 sensor readings.
public enum SubtitleTrackReader {
    /// The entries of subtitle track `track` in each file, in order, each with its time in
    /// milliseconds from the take's start (`-copyts`: the file's own times). A file ffmpeg
    /// cannot read gives none, and ffmpeg's words are printed so the test that expected some
    /// says why.
    public static func entries(in paths: [String], track: Int) throws -> [(milliseconds: Double, json: String)] {
        var entries: [(Double, String)] = []
        for path in paths {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
            process.arguments = ["-v", "error", "-copyts", "-i", path, "-map", "0:s:\(track)", "-f", "srt", "-"]
            let out = Pipe()
            process.standardOutput = out
            let failure = Pipe()
            process.standardError = failure
            try process.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            let said = failure.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            if process.terminationStatus != 0 {
                print("ffmpeg could not read subtitle track \(track) of \(path): \(String(decoding: said, as: UTF8.self))")
            }
            var time = 0.0
            for line in String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init) {
                if line.contains(" --> ") {
                    // 00:00:01,234 --> …
                    let clock = line.split(separator: " ")[0].split(whereSeparator: { $0 == ":" || $0 == "," }).compactMap { Double($0) }
                    if clock.count == 4 { time = ((clock[0] * 60 + clock[1]) * 60 + clock[2]) * 1000 + clock[3] }
                } else if line.hasPrefix("{") {
                    entries.append((time, line))
                }
            }
        }
        return entries
    }
}
