import FleetCore
import FleetProtocol
import FleetRecording
import Foundation

/// `recordings export --framed` (detection.md, "Auto-framing"): each camera segment that
/// carries auto-framing entries, made again as the framer framed it live — every frame cut to
/// the crop in force at it and scaled to one size — beside the whole pictures, which the take
/// keeps as they were. The crop follows the file's own framing entries, each applied from its
/// frame on (ffmpeg's `sendcmd` retargets a scale and a crop of fixed size, which keeps every
/// frame's own time); the result is H.264 at a high quality. Runs ffmpeg from PATH.
public enum TakeReframe {
    public struct Job: Sendable, Equatable {
        public var output: String
        public var camera: String
        public var video: String
        /// The source's and the result's sizes.
        public var source: (width: Int, height: Int)
        public var size: (width: Int, height: Int)
        /// From each time on (seconds of the file's time: from the take's start), the crop.
        public var crops: [(seconds: Double, crop: NormalizedRect?)]

        public static func == (left: Job, right: Job) -> Bool {
            left.output == right.output && left.video == right.video && left.source == right.source && left.size == right.size
                && left.crops.map(\.seconds) == right.crops.map(\.seconds) && left.crops.map(\.crop) == right.crops.map(\.crop)
        }
    }

    /// The result's width when none is asked for: a 720p picture from a wide sensor, never
    /// wider than the sensor.
    public static let defaultWidth = 1280

    /// The files to make from an exported take: every finished camera segment with framing
    /// entries, in `size` (default: `defaultWidth` wide, the sensor's shape). `directory` is
    /// where the export put DEVICE/FILE; `entries` reads a file's framing entries.
    public static func plan(
        take: Capfleet_V1_TakeInfo, directory: String, size: (width: Int, height: Int)?,
        entries: (String) throws -> [FramingEntry] = { try FramingEntry.entries(in: $0) }
    ) throws -> [Job] {
        var jobs: [Job] = []
        for segment in take.segments where segment.state != "open" {
            guard let part = take.devices.first(where: { $0.deviceID == segment.deviceID }), part.pixelFormat != "FLAC", part.width > 0,
                part.height > 0
            else { continue }
            let video = directory + "/" + segment.deviceID + "/" + (segment.path as NSString).lastPathComponent
            let found = try entries(video)
            // Framed by the camera's optics, the file already holds the framed picture.
            guard found.contains(where: { !$0.optical && $0.crop != nil }) else { continue }
            let source = (Int(part.width), Int(part.height))
            let chosen = size ?? defaultSize(width: source.0, height: source.1)
            let crops = found.map { entry in
                // The file's times are the take's, in whole milliseconds (rounded either way): the
                // command comes half of one before its frame's, so that frame is the first it
                // applies to, and never the one before (a frame interval earlier).
                (
                    seconds: max(0, (Double(entry.fleetTime &- take.startFleetNs) / 1e6).rounded(.down) - 0.5) / 1000,
                    crop: entry.optical ? nil : entry.crop
                )
            }
            let name = (segment.path as NSString).lastPathComponent
            jobs.append(
                Job(output: directory + "/framed/" + name, camera: segment.deviceID, video: video, source: source, size: chosen, crops: crops))
        }
        return jobs
    }

    /// `defaultWidth` wide (the sensor's width if narrower), the sensor's shape, even sides.
    public static func defaultSize(width: Int, height: Int) -> (width: Int, height: Int) {
        let wide = min(defaultWidth, width) & ~1
        return (wide, max(2, Int((Double(height) * Double(wide) / Double(width)).rounded()) & ~1))
    }

    /// For a crop, the size to scale the whole picture to and where in it to cut `size` out:
    /// the crop's own part of the picture, the result's size exactly.
    public static func placement(
        of crop: NormalizedRect?, source: (width: Int, height: Int), size: (width: Int, height: Int)
    ) -> (
        scaledWidth: Int, scaledHeight: Int, x: Int, y: Int
    ) {
        let region = crop ?? .whole
        let width = max(region.width, 1e-3), height = max(region.height, 1e-3)
        let scaledWidth = max(size.width, Int((Double(size.width) / width).rounded()) & ~1)
        let scaledHeight = max(size.height, Int((Double(size.height) / height).rounded()) & ~1)
        let x = min(max(0, Int((region.x * Double(scaledWidth)).rounded())), scaledWidth - size.width)
        let y = min(max(0, Int((region.y * Double(scaledHeight)).rounded())), scaledHeight - size.height)
        return (scaledWidth, scaledHeight, x, y)
    }

    /// The job's `sendcmd` file: from each entry's time, the scale and the cut it needs.
    public static func commands(_ job: Job) -> String {
        job.crops.map { entry in
            let place = placement(of: entry.crop, source: job.source, size: job.size)
            return String(format: "%.4f", entry.seconds)
                + " scale@reframe w \(place.scaledWidth), scale@reframe h \(place.scaledHeight), crop@reframe x \(place.x), crop@reframe y \(place.y);"
        }.joined(separator: "\n") + "\n"
    }

    /// ffmpeg's arguments for a job whose commands are in `commandFile` (a name in the
    /// directory ffmpeg runs in: filter arguments take no paths with their own colons).
    public static func arguments(_ job: Job, commandFile: String) -> [String] {
        let first = placement(of: job.crops.first?.crop, source: job.source, size: job.size)
        let filter =
            "sendcmd=f=\(commandFile),scale@reframe=\(first.scaledWidth):\(first.scaledHeight),"
            + "crop@reframe=\(job.size.width):\(job.size.height):\(first.x):\(first.y):exact=1,format=yuv420p"
        return [
            "-nostdin", "-v", "error", "-y", "-copyts", "-i", job.video, "-map", "0:v:0", "-vf", filter, "-fps_mode", "passthrough",
            "-c:v", "libx264", "-crf", "18", "-preset", "veryfast", "-metadata", "title=\(job.camera), reframed as it was framed", job.output,
        ]
    }

    /// Makes the job's file with ffmpeg.
    public static func run(_ job: Job) throws {
        let folder = (job.output as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let commandFile = ((job.output as NSString).lastPathComponent as NSString).deletingPathExtension + ".framing"
        let commandPath = folder + "/" + commandFile
        try commands(job).write(toFile: commandPath, atomically: true, encoding: .utf8)
        try ExportFFmpeg.run(arguments(job, commandFile: commandFile), in: folder, making: job.output, for: "--framed")
        // The commands file is the export's scratch: what could not be removed is said.
        do {
            try FileManager.default.removeItem(atPath: commandPath)
        } catch {
            print("note: \(commandPath) could not be removed: \(error)")
        }
    }
}
