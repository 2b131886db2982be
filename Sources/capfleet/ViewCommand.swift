import ArgumentParser
import FleetBus
import FleetClient
import FleetCore
import FleetProtocol
import Foundation

/// `capfleet view DEVICE`: a camera live, through the coordinator's live endpoint. Subscribing
/// is what wakes the device's full-rate flow; leaving ends it (frames.md, "Live frames on demand").
struct ViewCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "view",
        abstract: "Show a camera live: its full-rate frames, piped to a player (ffplay or mpv) or written to a file or FIFO.",
        discussion: """
            Frames come through the coordinator while you watch and stop flowing when you leave. \
            Raw formats play with ffplay or mpv reading rawvideo from stdin; MJPG as a stream of \
            JPEGs. -o FILE (or a FIFO, or - for stdout) writes the frames back to back, as they \
            come, and prints how to play them. Consent applies: a device without it sends black frames.             --encoded shows a camera that a take is recording as H.264 or HEVC through the take's             own packets (an Annex B stream, a fraction of the raw bytes), from its next key frame.
            """)
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The device id.", completion: FleetCompletion.deviceIDs) var device: String
    @Option(name: .shortAndLong, help: "Write the frames to this file or FIFO (- for stdout) instead of a player.") var output: String?
    @Option(help: "The player to run (ffplay or mpv; default: the first of them found on PATH).") var player: String?
    @Option(help: "Stop after this many frames.") var frames: Int?
    @Option(help: "Stop after this many seconds.") var seconds: Double?
    @Option(help: "The coordinator's live port (default: the one the coordinator names).") var livePort: UInt16?
    @Flag(help: "The packets of the take recording the camera as H.264 or HEVC instead of raw frames.") var encoded = false

    func run() throws {
        if let refusal = ViewerDisplay.refusal(environment: ProcessInfo.processInfo.environment, writesToFile: output != nil, device: device) {
            throw CLIFailure(refusal)
        }
        // Raw frames: the newest wins. Packets: each depends on the one before, so a few
        // seconds of them may wait rather than break the picture until the next key frame.
        let socket = try LiveSubscription.open(
            coordinator, livePort: livePort, topic: encoded ? LiveTopic.encoded(device) : LiveTopic.frames(device), queue: encoded ? 256 : 2,
            purpose: "view cameras")
        // Ctrl-C or SIGTERM ends the view as the player closing does: the player hears the
        // same signal, and is reaped before capfleet exits, never left running.
        let stop = ViewStopSignal()
        var sink: FrameSink?
        defer { sink?.close() }
        let started = Date()
        var received = 0
        var lastSequence: UInt64?
        var skipped: UInt64 = 0
        var lastReport = Date()
        var reportedFrames = 0
        var warnedAfterQuiet = false
        var stream = EncodedStreamState()
        while frames.map({ received < $0 }) ?? true {
            if stop.received != 0 { break }
            if let seconds, Date().timeIntervalSince(started) >= seconds { break }
            guard socket.waitForInput(milliseconds: 250) else {
                if !warnedAfterQuiet, received == 0, Date().timeIntervalSince(started) > 5 {
                    warnedAfterQuiet = true
                    FileHandle.standardError.write(
                        Data(
                            (encoded
                                ? "no packet from \(device) after 5 s: is a take recording it as h264 or hevc? (capfleet recordings list)\n"
                                : "no frame from \(device) after 5 s: is it registered and streaming? (capfleet devices)\n").utf8))
                }
                continue
            }
            guard let message = try? socket.receiveMultipart(dontWait: true, maxParts: 3), message.parts.count == 3,
                let header = try? Capfleet_V1_FrameHeader(serializedBytes: message.parts[1].array),
                header.deviceID == device
            else { continue }
            var prefix: [UInt8] = []
            if encoded {
                switch stream.take(header) {
                case .skip: continue
                case let .write(config): prefix = config
                case let .unplayable(reason): throw CLIFailure(reason)
                }
            }
            let layout = header.layout
            if sink?.layout != layout {
                sink?.close()
                sink = try FrameSink.open(
                    layout: layout, frameRate: estimatedRate(received: received, since: started),
                    output: output, player: player)
                stop.child = sink?.processID ?? 0
                FileHandle.standardError.write(Data((sink?.announcement ?? "").utf8))
            }
            if let last = lastSequence, header.sequence > last + 1 { skipped += header.sequence - last - 1 }
            lastSequence = header.sequence
            guard prefix.isEmpty || sink?.write(prefix) == true, sink?.write(message.parts[2]) == true else {
                // The player was closed or the reader went away: that is the viewer leaving.
                break
            }
            received += 1
            let now = Date()
            if output != "-", now.timeIntervalSince(lastReport) >= 1, isatty(STDERR_FILENO) == 1 {
                let rate = Double(received - reportedFrames) / now.timeIntervalSince(lastReport)
                let black = header.flags & UInt32(Capfleet_V1_FrameFlag.black.rawValue) != 0 ? " (black: no consent)" : ""
                FileHandle.standardError.write(
                    Data("\r\(device): \(received) frames, \(String(format: "%.1f", rate)) fps, \(skipped) not shown\(black)   ".utf8))
                lastReport = now
                reportedFrames = received
            }
        }
        if isatty(STDERR_FILENO) == 1, output != "-" { FileHandle.standardError.write(Data("\n".utf8)) }
        if stop.received != 0 {
            sink?.close()
            sink = nil
            throw ExitCode(128 + stop.received)
        }
    }

    /// The camera's rate as seen so far, for a player that wants one; 30 until there is a measure.
    private func estimatedRate(received: Int, since started: Date) -> Double {
        let elapsed = Date().timeIntervalSince(started)
        return received > 4 && elapsed > 0 ? Double(received) / elapsed : 30
    }
}

/// Where viewed frames go: a player's stdin, a file or FIFO, or stdout.
final class FrameSink {
    let layout: Capfleet_V1_FrameLayout
    let announcement: String
    private let handle: FileHandle
    private let process: Process?

    private init(layout: Capfleet_V1_FrameLayout, handle: FileHandle, process: Process?, announcement: String) {
        self.layout = layout
        self.handle = handle
        self.process = process
        self.announcement = announcement
    }

    /// The input options that make ffplay (or ffmpeg) read these frames.
    static func ffmpegInput(_ layout: Capfleet_V1_FrameLayout, frameRate: Double) throws -> [String] {
        let format = PixelFormat(layout.pixelFormat)
        if format == .mjpeg { return ["-f", "mjpeg", "-framerate", String(format: "%.3f", frameRate)] }
        if let stream = EncodedStreamState.elementaryStream(layout.pixelFormat) {
            return ["-f", stream, "-framerate", String(format: "%.3f", frameRate)]
        }
        guard let name = format.ffmpegName else {
            throw CLIFailure("frames of \(layout.pixelFormat) have no rawvideo pixel format a player knows; use -o FILE to keep them as they are")
        }
        return [
            "-f", "rawvideo", "-pixel_format", name, "-video_size", "\(layout.width)x\(layout.height)",
            "-framerate", String(format: "%.3f", frameRate),
        ]
    }

    static func open(layout: Capfleet_V1_FrameLayout, frameRate: Double, output: String?, player: String?) throws -> FrameSink {
        let input = (try? ffmpegInput(layout, frameRate: frameRate)) ?? []
        let playHint = input.isEmpty ? "" : " (play: ffplay \(input.joined(separator: " ")) -i FILE)"
        if let output {
            if output == "-" {
                return FrameSink(
                    layout: layout, handle: .standardOutput, process: nil,
                    announcement: "\(layout.width)x\(layout.height) \(layout.pixelFormat) frames on stdout\(playHint)\n")
            }
            if !FileManager.default.fileExists(atPath: output) {
                guard FileManager.default.createFile(atPath: output, contents: nil) else {
                    throw CLIFailure("cannot create \(output): check the directory exists and is writable")
                }
            }
            // A FIFO opens when its reader does, which is what a FIFO is for.
            guard let handle = FileHandle(forWritingAtPath: output) else {
                throw CLIFailure("cannot write \(output): check it is writable")
            }
            handle.truncateFile(atOffset: 0)
            return FrameSink(
                layout: layout, handle: handle, process: nil,
                announcement: "writing \(layout.width)x\(layout.height) \(layout.pixelFormat) frames to \(output)\(playHint)\n")
        }
        let input2 = try ffmpegInput(layout, frameRate: frameRate)
        guard let (path, kind) = findPlayer(player) else {
            throw CLIFailure(
                player.map { "cannot find the player \($0) on PATH" }
                    ?? "no player found (ffplay from Debian's ffmpeg, or mpv): install one, or write the frames with -o FILE")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        switch kind {
        case .ffplay:
            process.arguments = ["-hide_banner", "-loglevel", "error", "-window_title", "capfleet view"] + input2 + ["-i", "-"]
        case .mpv:
            process.arguments = mpvArguments(layout, frameRate: frameRate) + ["--title=capfleet view", "-"]
        }
        let pipe = Pipe()
        process.standardInput = pipe
        do {
            try process.run()
        } catch {
            throw CLIFailure("cannot start \(path): \(error)")
        }
        // A closed player must end the view, not kill it with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        return FrameSink(
            layout: layout, handle: pipe.fileHandleForWriting, process: process,
            announcement: "\(layout.width)x\(layout.height) \(layout.pixelFormat) frames to \(URL(fileURLWithPath: path).lastPathComponent)\n")
    }

    /// The player's process id; 0 when frames go to a file.
    var processID: Int32 { process?.processIdentifier ?? 0 }

    /// False when the reader has gone (the player closed).
    func write(_ part: ZMQMessage) -> Bool {
        withExtendedLifetime(part) { write(part.bytes) }
    }

    func write(_ bytes: some DataProtocol) -> Bool {
        do {
            try handle.write(contentsOf: bytes)
            return true
        } catch {
            return false
        }
    }

    func close() {
        if process != nil { try? handle.close() } else if handle !== FileHandle.standardOutput { try? handle.close() }
        if let process, process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    enum PlayerKind { case ffplay, mpv }

    static func findPlayer(_ named: String?) -> (String, PlayerKind)? {
        let candidates = named.map { [$0] } ?? ["ffplay", "mpv"]
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map(String.init)
        for candidate in candidates {
            let kind: PlayerKind = candidate.hasSuffix("mpv") ? .mpv : .ffplay
            if candidate.contains("/") {
                if FileManager.default.isExecutableFile(atPath: candidate) { return (candidate, kind) }
                continue
            }
            for directory in path where FileManager.default.isExecutableFile(atPath: directory + "/" + candidate) {
                return (directory + "/" + candidate, kind)
            }
        }
        return nil
    }

    static func mpvArguments(_ layout: Capfleet_V1_FrameLayout, frameRate: Double) -> [String] {
        let format = PixelFormat(layout.pixelFormat)
        if format == .mjpeg { return ["--demuxer=lavf", "--demuxer-lavf-format=mjpeg", "--container-fps-override=\(frameRate)"] }
        if let stream = EncodedStreamState.elementaryStream(layout.pixelFormat) {
            return ["--demuxer=lavf", "--demuxer-lavf-format=\(stream)", "--container-fps-override=\(frameRate)"]
        }
        return [
            "--demuxer=rawvideo", "--demuxer-rawvideo-w=\(layout.width)", "--demuxer-rawvideo-h=\(layout.height)",
            "--demuxer-rawvideo-mp-format=\(format.ffmpegName ?? "yuyv422")", "--demuxer-rawvideo-fps=\(frameRate)",
        ]
    }
}

/// Which of a take's packets a viewer of the encoded stream writes: from a key frame on, the
/// decoder's configuration (parameter sets, Annex B) before each key frame whose
/// configuration is new, and again from the next key frame after a packet went missing on
/// the way (each packet depends on the one before it).
struct EncodedStreamState {
    enum Verdict: Equatable {
        case skip
        /// Write the packet, after these bytes (empty: nothing before it).
        case write([UInt8])
        case unplayable(String)
    }

    private var lastSequence: UInt64?
    private var lastDrops: UInt64 = 0
    private var writtenConfig: [UInt8]?
    private var synchronised = false

    /// The demuxer that reads the packets of this FourCC as they come (Annex B), if any.
    static func elementaryStream(_ fourCC: String) -> String? {
        switch fourCC {
        case VideoCodec.h264.fourCC: "h264"
        case VideoCodec.hevc.fourCC: "hevc"
        default: nil
        }
    }

    mutating func take(_ header: Capfleet_V1_FrameHeader) -> Verdict {
        guard header.hasEncoded else { return .skip }
        guard Self.elementaryStream(header.layout.pixelFormat) != nil else {
            return .unplayable(
                "the take records \(header.deviceID) as \(header.layout.pixelFormat), which no player reads as a stream: view it without --encoded")
        }
        let drops = Self.total(header.drops)
        // A gap the camera's own drops do not explain: a packet lost on the way.
        if let last = lastSequence, header.sequence > last + 1, header.sequence - last - 1 > drops &- lastDrops { synchronised = false }
        lastSequence = header.sequence
        lastDrops = drops
        let key = header.flags & UInt32(Capfleet_V1_FrameFlag.keyFrame.rawValue) != 0
        if !synchronised {
            guard key else { return .skip }
            synchronised = true
        }
        let config = [UInt8](header.encoded.codecConfig)
        guard key, config != writtenConfig else { return .write([]) }
        writtenConfig = config
        return .write(config)
    }

    private static func total(_ drops: Capfleet_V1_DropCounts) -> UInt64 {
        drops.late &+ drops.outOfBuffers &+ drops.discontinuity &+ drops.encoderLate
    }
}
