import ArgumentParser
import FleetCore
import FleetEncoding
import FleetRecording
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What the takes' codecs cost and give on this machine: each encoder alone on one core (CPU
/// per 1080p30 stream, streams per core, bytes per frame against raw, bit-exactness for FFV1,
/// PSNR and SSIM for H.264 and HEVC from ffmpeg's own filters) on two scenes, then end to end:
/// how many 1080p30 synthetic cameras real agents record on their disks without a drop, per
/// codec, against raw in the same run. Stabilised H.264 (deshake) is measured beside plain
/// H.264 on the same frames: its CPU per stream and its own share of it.
struct EncodeBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encode",
        abstract: "Codecs for takes: CPU per 1080p30 stream, size against raw, exactness or PSNR, cameras recorded without drops.")

    @Option(help: "Frames of each scene fed to each encoder.") var frames: Int = 60
    @Option(help: "Seconds recorded per step of the end-to-end ramp.") var seconds: Double = 8
    @Option(help: "Most cameras the end-to-end ramp tries.") var maxStreams: Int = 4
    @Option(help: "x264/x265 speed preset (the agents' encoder_preset).") var preset: String = "superfast"

    func run() throws {
        let directory = RecordBenchFleet.benchDirectory(suffix: "encode")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let rawFrameBytes = EncodeScenes.width * EncodeScenes.height * 2
        progress(
            "== encoders alone, one thread each: \(frames) frames of 1920x1080 YUYV per scene (raw \(rawFrameBytes) bytes a frame), x264/x265 preset \(preset), quality (CRF) \(TakeEncoding.defaultQuality)"
        )
        progress("scene              codec         encoder   CPU %/1080p30 stream  streams/core  bytes/frame    vs raw  fidelity")
        for (name, scene) in [("synthetic pattern", EncodeScenes.pattern(frames: frames)), ("moving scene", EncodeScenes.moving(frames: frames))] {
            let source = directory + "/source.yuv"
            guard FileManager.default.createFile(atPath: source, contents: Data(scene.joined())) else {
                throw BenchFailure("cannot write the scene's frames to \(source) for ffmpeg to compare against")
            }
            var plainH264: Double?
            for (codec, stabilisation) in [(VideoCodec.ffv1, VideoStabilisation.off), (.h264, .off), (.hevc, .off), (.h264, .deshake)] {
                var row = try measure(codec, stabilisation: stabilisation, scene: scene, source: source, directory: directory)
                if codec == .h264, stabilisation == .off { plainH264 = row.cpuPercentPerStream }
                if stabilisation != .off, let plainH264 {
                    // Against the camera's frames a steadied picture differs by design: its cost is the measure.
                    row.fidelity = String(
                        format: "deshake's own CPU %.1f %%/stream, %.2f× plain h264's (the pixels are moved: no PSNR against the camera)",
                        row.cpuPercentPerStream - plainH264, row.cpuPercentPerStream / plainH264)
                }
                progress(
                    String(
                        format: "%-18@ %-13@ %-9@ %20.1f  %12.2f  %11.0f  %7.1f×  %@", name as NSString,
                        (stabilisation == .off ? codec.rawValue : "\(codec.rawValue)+\(stabilisation.rawValue)") as NSString,
                        row.encoder as NSString, row.cpuPercentPerStream, 100 / row.cpuPercentPerStream, row.bytesPerFrame,
                        Double(rawFrameBytes) / row.bytesPerFrame, row.fidelity as NSString))
            }
        }
        try endToEnd()
    }

    struct Row {
        var encoder: String
        var cpuPercentPerStream: Double
        var bytesPerFrame: Double
        var fidelity: String
    }

    /// One codec over one scene: encode (CPU timed), mux into a segment, check what decodes.
    private func measure(
        _ codec: VideoCodec, stabilisation: VideoStabilisation = .off, scene: [[UInt8]], source: String, directory: String
    ) throws -> Row {
        let choice = EncoderChoice.software(for: codec)!
        let encoder = try VideoEncoder(
            choice: choice, encoding: TakeEncoding(codec: codec, stabilisation: stabilisation),
            source: VideoEncoder.Source(pixelFormat: "YUYV", width: EncodeScenes.width, height: EncodeScenes.height, frameRate: 30),
            threads: 1, preset: preset)
        var packets: [(bytes: [UInt8], index: Int64, key: Bool)] = []
        let keep: (VideoEncoder.Packet) -> Void = { packets.append((Array($0.bytes), $0.frameIndex, $0.isKeyFrame)) }
        let before = Self.processCPUSeconds()
        for (index, frame) in scene.enumerated() {
            try frame.withUnsafeBytes {
                try encoder.encode($0.baseAddress!, count: $0.count, frameIndex: Int64(index), forceKey: false, deliver: keep)
            }
        }
        try encoder.drain(deliver: keep)
        let cpu = Self.processCPUSeconds() - before
        let path = directory + "/\(codec.rawValue)-\(stabilisation.rawValue).mkv"
        let writer = try MatroskaSegmentWriter(
            path: path,
            format: RecordedVideoFormat(
                pixelFormat: PixelFormat(codec.fourCC), width: EncodeScenes.width,
                height: EncodeScenes.height, frameRate: 30, codecConfig: encoder.codecConfig),
            title: "encode bench")
        for packet in packets {
            try packet.bytes.withUnsafeBytes {
                try writer.appendFrame($0, at: UInt64(packet.index) * 33_333_333, duration: 33_333_333, keyframe: packet.key)
            }
        }
        try writer.finish()
        let bytes = Double(packets.reduce(0) { $0 + $1.bytes.count }) / Double(max(packets.count, 1))
        let fidelity: String
        if codec == .ffv1 {
            let decoded = try Self.tool("/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-map", "0:v", "-f", "rawvideo", "-pix_fmt", "yuyv422", "-"])
            let size = EncodeScenes.width * EncodeScenes.height * 2
            let exact = scene.indices.filter { index in
                decoded.count >= (index + 1) * size && decoded.subdata(in: index * size..<(index + 1) * size).elementsEqual(scene[index])
            }.count
            fidelity = "bit-exact \(exact)/\(scene.count) frames"
        } else if stabilisation != .off {
            fidelity = ""
        } else {
            let psnr = try Self.compare(path, source: source, filter: "psnr", key: "average:")
            let ssim = try Self.compare(path, source: source, filter: "ssim", key: "All:")
            fidelity = String(format: "PSNR %.2f dB, SSIM %.4f (ffmpeg, against the camera frames)", psnr, ssim)
        }
        return Row(encoder: choice.name, cpuPercentPerStream: cpu / Double(scene.count) * 30 * 100, bytesPerFrame: bytes, fidelity: fidelity)
    }

    /// Cameras recorded on the agents' disks without a drop, per codec, on one fleet: each
    /// step adds a camera and records it once per codec still keeping up.
    private func endToEnd() throws {
        progress(
            "\n== end to end: 1920x1080 YUYV 30 fps synthetic cameras, one agent each, takes written on the agents (encoder_threads 2, preset superfast), \(fmt(seconds)) s per step"
        )
        progress("cameras  codec  fps/camera  frames  dropped  MB/s stored  CPU %/camera")
        let fleet = try RecordBenchFleet(store: .agent)
        defer { fleet.stop() }
        var keepingUp: [VideoCodec] = [.raw, .ffv1, .h264, .hevc]
        var most: [VideoCodec: Int] = [:]
        for cameras in 1...max(1, maxStreams) where !keepingUp.isEmpty {
            try fleet.ensureAgents(cameras)
            for codec in keepingUp {
                let step = try fleet.record(seconds: seconds, baselineSeconds: 0, encoding: TakeEncoding(codec: codec))
                let shown = step
                progress(
                    String(
                        format: "%7d  %-5@  %10.2f  %6d  %7d  %11.1f  %12.1f", cameras, codec.rawValue as NSString, shown.framesPerSecondPerStream,
                        shown.frames, shown.dropped, shown.megabytesPerSecond, shown.cpuPercent / Double(cameras)))
                try fleet.delete(step.takeID)
                if step.dropped == 0, step.framesPerSecondPerStream >= 29, step.backlogSeconds < 3 {
                    most[codec] = cameras
                } else {
                    keepingUp.removeAll { $0 == codec }
                }
            }
        }
        let raw = most[.raw] ?? 0
        let summary = [VideoCodec.raw, .ffv1, .h264, .hevc].map { codec in
            "\(codec.rawValue) \(most[codec] ?? 0)"
                + (codec != .raw && raw > 0 ? String(format: " (%.2f of raw)", Double(most[codec] ?? 0) / Double(raw)) : "")
        }
        progress("1080p30 cameras recorded without drops on this machine (at most \(maxStreams) tried): " + summary.joined(separator: ", "))
    }

    static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// ffmpeg's psnr or ssim filter over the decoded segment against the source frames.
    static func compare(_ path: String, source: String, filter: String, key: String) throws -> Double {
        let said = try tool(
            "/usr/bin/ffmpeg",
            [
                "-v", "info", "-nostats", "-i", path, "-f", "rawvideo", "-pix_fmt", "yuyv422", "-s", "\(EncodeScenes.width)x\(EncodeScenes.height)",
                "-framerate", "30", "-i", source, "-lavfi", "[0:v][1:v]\(filter)", "-f", "null", "-",
            ], stderr: true)
        let text = String(decoding: said, as: UTF8.self)
        guard let line = text.split(separator: "\n").last(where: { $0.contains(key) }),
            let range = line.range(of: key)
        else { throw BenchFailure("ffmpeg's \(filter) filter said nothing about \(path): \(text.suffix(400))") }
        let value = line[range.upperBound...].prefix { $0 == "." || $0.isNumber || $0 == "-" }
        guard let number = Double(value) else { throw BenchFailure("cannot read ffmpeg's \(filter) figure in: \(line)") }
        return number
    }

    static func tool(_ executable: String, _ arguments: [String], stderr: Bool = false) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        if stderr {
            process.standardError = output
            process.standardOutput = FileHandle.nullDevice
        } else {
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
        }
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchFailure("\(executable) \(arguments.joined(separator: " ")) failed") }
        return data
    }
}
