import FleetProtocol
import Foundation

/// `recordings export --mux` (recordings.md, "Exporting with sound"): for each camera segment
/// of a take, one file with its video and the chosen microphones' sound over the same span, on
/// one timeline, which ffmpeg, VLC and mpv play in sync. Video is copied as it was recorded;
/// sound is placed by its blocks' fleet times, stretched or squeezed by at most 0.1 % to those
/// times (ffmpeg's `aresample=async`), so a microphone's own clock rate never drifts from the
/// picture, and stays FLAC. Runs ffmpeg from PATH, which must be there.
public enum TakeMux {
    public struct Job: Sendable, Equatable {
        public var output: String
        public var camera: String
        public var video: String
        public var sound: [Sound]

        public struct Sound: Sendable, Equatable {
            public var microphone: String
            public var path: String

            public init(microphone: String, path: String) {
                self.microphone = microphone
                self.path = path
            }
        }
    }

    /// The files to make from an exported take: every camera segment with the sound of the
    /// microphones (`microphones`, or all the take's) whose segments overlap its span.
    /// `directory` is where the export put DEVICE/FILE.
    public static func plan(take: Capfleet_V1_TakeInfo, directory: String, microphones: [String]) throws -> [Job] {
        let soundParts = Set(take.devices.filter { $0.pixelFormat == "FLAC" }.map(\.deviceID))
        guard !soundParts.isEmpty else {
            throw TakeMuxError("take \(take.id) recorded no microphone: --mux puts cameras and their sound together")
        }
        if let unknown = microphones.first(where: { !soundParts.contains($0) }) {
            throw TakeMuxError("\(unknown) is not a microphone of take \(take.id); its microphones: \(soundParts.sorted().joined(separator: ", "))")
        }
        let chosen = microphones.isEmpty ? soundParts : Set(microphones)
        let exported = { (segment: Capfleet_V1_TakeSegmentInfo) in
            directory + "/" + segment.deviceID + "/" + (segment.path as NSString).lastPathComponent
        }
        let finished = take.segments.filter { $0.state != "open" }
        return finished.filter { !soundParts.contains($0.deviceID) }.map { segment in
            let sound = finished.filter {
                chosen.contains($0.deviceID) && $0.firstFleetNs <= segment.lastFleetNs && $0.lastFleetNs >= segment.firstFleetNs
            }
            .sorted { ($0.deviceID, $0.number) < ($1.deviceID, $1.number) }
            .map { Job.Sound(microphone: $0.deviceID, path: exported($0)) }
            let name = (segment.path as NSString).lastPathComponent
            return Job(output: directory + "/muxed/" + name, camera: segment.deviceID, video: exported(segment), sound: sound)
        }.filter { !$0.sound.isEmpty }
    }

    /// ffmpeg's arguments for a job: the files' own times kept (`-copyts`), video copied, each
    /// microphone's sound a FLAC track titled with its device id.
    public static func arguments(_ job: Job) -> [String] {
        var arguments = ["-v", "error", "-y", "-copyts", "-i", job.video]
        for sound in job.sound { arguments += ["-i", sound.path] }
        arguments += ["-map", "0:v:0"]
        for index in job.sound.indices { arguments += ["-map", "\(index + 1):a:0"] }
        arguments += ["-c:v", "copy", "-c:a", "flac", "-af", "aresample=async=1000"]
        for (index, sound) in job.sound.enumerated() { arguments += ["-metadata:s:a:\(index)", "title=\(sound.microphone)"] }
        arguments += ["-metadata", "title=\(job.camera) with \(job.sound.map(\.microphone).joined(separator: ", "))", job.output]
        return arguments
    }

    /// Makes the job's file with ffmpeg.
    public static func run(_ job: Job) throws {
        try FileManager.default.createDirectory(atPath: (job.output as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try ExportFFmpeg.run(arguments(job), making: job.output, for: "--mux")
    }
}

/// Debian's ffmpeg from PATH, for the files an export makes beside the take's own (`--mux`,
/// `--framed`): a missing ffmpeg, or one that fails, is said with what it printed.
enum ExportFFmpeg {
    static func run(_ arguments: [String], in directory: String? = nil, making output: String, for option: String) throws {
        guard
            let ffmpeg = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map({ "\($0)/ffmpeg" })
                .first(where: FileManager.default.isExecutableFile(atPath:))
        else {
            throw TakeMuxError("\(option) needs ffmpeg on PATH (Debian's ffmpeg package); the take's files are exported without it")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ffmpeg)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let errors = Pipe()
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let said = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TakeMuxError(
                "ffmpeg could not make \(output): \(String(decoding: said, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))")
        }
    }
}

/// Why `--mux` could not make its files, and what to do.
public struct TakeMuxError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
