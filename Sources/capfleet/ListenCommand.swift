import ArgumentParser
import FleetBus
import FleetClient
import FleetCore
import FleetProtocol
import Foundation

/// `capfleet listen MIC`: a microphone live, through the coordinator's live endpoint, as
/// `capfleet view` shows a camera (frames.md, "Microphones on the live path"). Listening wakes
/// the microphone's flow; leaving ends it.
struct ListenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "listen",
        abstract: "Play a microphone live through a player (ffplay or mpv), or write its sound to a file or FIFO.",
        discussion: """
            Sound comes through the coordinator while you listen and stops flowing when you leave. \
            The player reads raw 16-bit samples from stdin. -o FILE writes them back to back \
            (FILE.wav: a WAV file), a block the network lost replaced by as much silence, so \
            the file keeps the microphone's timeline. Consent applies: a microphone without it \
            sends silence.
            """)
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The microphone's device id.", completion: FleetCompletion.deviceIDs) var device: String
    @Option(name: .shortAndLong, help: "Write the sound to this file or FIFO (- for stdout; FILE.wav for WAV) instead of a player.")
    var output: String?
    @Option(help: "The player to run (ffplay or mpv; default: the first of them found on PATH).") var player: String?
    @Option(help: "Stop after this many seconds.") var seconds: Double?
    @Option(help: "The coordinator's live port (default: the one the coordinator names).") var livePort: UInt16?
    @Option(
        help:
            "Also write each block's times to this CSV file: first_frame, frames, capture_monotonic_ns, fleet_time_ns (empty without fleet time), uncertainty_ns, timestamp_source, silenced."
    )
    var blocks: String?

    func run() throws {
        // Half a second of 10 ms blocks may wait: sound breaks audibly where frames would not.
        let socket = try LiveSubscription.open(coordinator, livePort: livePort, topic: LiveTopic.frames(device), queue: 50, purpose: "listen")
        let stop = ViewStopSignal()
        var sink: SoundSink?
        defer { sink?.close() }
        var blockLog: FileHandle?
        defer { try? blockLog?.close() }
        if let blocks {
            guard FileManager.default.createFile(atPath: blocks, contents: Data(Self.blockColumns.utf8)),
                let handle = FileHandle(forWritingAtPath: blocks)
            else { throw CLIFailure("cannot write \(blocks): check the directory exists and is writable") }
            handle.seekToEndOfFile()
            blockLog = handle
        }
        let started = Date()
        var timeline = SoundTimeline()
        var lastReport = Date()
        var warnedAfterQuiet = false
        while true {
            if stop.received != 0 { break }
            if let seconds, Date().timeIntervalSince(started) >= seconds { break }
            guard socket.waitForInput(milliseconds: 250) else {
                if !warnedAfterQuiet, timeline.blocks == 0, Date().timeIntervalSince(started) > 5 {
                    warnedAfterQuiet = true
                    FileHandle.standardError.write(
                        Data("no sound from \(device) after 5 s: is it a registered, capturing microphone? (capfleet devices)\n".utf8))
                }
                continue
            }
            guard let message = try? socket.receiveMultipart(dontWait: true, maxParts: 3), message.parts.count == 3,
                let header = try? Capfleet_V1_FrameHeader(serializedBytes: message.parts[1].array), header.deviceID == device
            else { continue }
            guard header.hasAudio, let format = AudioFormat(wire: header.audio.format) else {
                throw CLIFailure("\(device) is not a microphone: its live stream carries pictures (capfleet view \(device))")
            }
            if sink?.format != format {
                sink?.close()
                sink = try SoundSink.open(format: format, output: output, player: player)
                stop.child = sink?.processID ?? 0
                timeline = SoundTimeline()
                FileHandle.standardError.write(Data((sink?.announcement ?? "").utf8))
            }
            let silence = timeline.take(header.audio)
            let bytesPerFrame = format.channels * 2
            guard silence == 0 || sink?.write([UInt8](repeating: 0, count: silence * bytesPerFrame)) == true,
                sink?.write(message.parts[2]) == true
            else { break }
            if let blockLog { blockLog.write(Data(Self.blockLine(header).utf8)) }
            let now = Date()
            if output != "-", now.timeIntervalSince(lastReport) >= 1, isatty(STDERR_FILENO) == 1 {
                let silent = header.flags & UInt32(Capfleet_V1_FrameFlag.black.rawValue) != 0 ? " (silence: no consent)" : ""
                let heard = Double(timeline.frames) / Double(format.sampleRate)
                FileHandle.standardError.write(
                    Data(
                        "\r\(device): \(String(format: "%.1f", heard)) s of \(format.label), \(timeline.missedFrames) frames lost as silence\(silent)   "
                            .utf8))
                lastReport = now
            }
        }
        if isatty(STDERR_FILENO) == 1, output != "-" { FileHandle.standardError.write(Data("\n".utf8)) }
        if stop.received != 0 {
            sink?.close()
            sink = nil
            throw ExitCode(128 + stop.received)
        }
    }
}

extension ListenCommand {
    static let blockColumns = "first_frame,frames,capture_monotonic_ns,fleet_time_ns,uncertainty_ns,timestamp_source,silenced\n"

    static func blockLine(_ header: Capfleet_V1_FrameHeader) -> String {
        let fleet = header.flags & UInt32(Capfleet_V1_FrameFlag.fleetTimeValid.rawValue) != 0 ? "\(header.fleetTimeNs)" : ""
        let silenced = header.flags & UInt32(Capfleet_V1_FrameFlag.black.rawValue) != 0
        return "\(header.audio.firstFrame),\(header.audio.frames),\(header.captureMonotonicNs),\(fleet),\(header.fleetTimeUncertaintyNs),"
            + "\(AudioClockNames.source(header.audio.timestampSource)),\(silenced)\n"
    }
}

/// Where a listener is in the microphone's stream: each block's first frame against the
/// frames written so far says how much silence stands in for blocks lost on the way (at most
/// a second: a longer gap is the agent starting over).
struct SoundTimeline {
    private(set) var blocks = 0
    private(set) var frames: UInt64 = 0
    private(set) var missedFrames: UInt64 = 0
    private var next: UInt64?

    /// The frames of silence to write before this block.
    mutating func take(_ block: Capfleet_V1_AudioBlock) -> Int {
        defer {
            blocks += 1
            frames += UInt64(block.frames)
            next = block.firstFrame + UInt64(block.frames)
        }
        guard let next, block.firstFrame > next else { return 0 }
        let gap = block.firstFrame - next
        let rate = UInt64(max(block.format.sampleRate, 1))
        guard gap <= rate else { return 0 }
        missedFrames += gap
        frames += gap
        return Int(gap)
    }
}

/// Where heard sound goes: a player's stdin, a file (WAV when named .wav) or FIFO, or stdout.
final class SoundSink {
    let format: AudioFormat
    let announcement: String
    private let handle: FileHandle
    private let process: Process?
    private let wav: Bool
    private var written: UInt64 = 0

    private init(format: AudioFormat, handle: FileHandle, process: Process?, wav: Bool, announcement: String) {
        self.format = format
        self.handle = handle
        self.process = process
        self.wav = wav
        self.announcement = announcement
    }

    /// ffplay's (and ffmpeg's) input options for these samples.
    static func ffmpegInput(_ format: AudioFormat) -> [String] {
        ["-f", "s16le", "-sample_rate", "\(format.sampleRate)", "-ch_layout", "\(format.channels)c"]
    }

    static func open(format: AudioFormat, output: String?, player: String?) throws -> SoundSink {
        let playHint = " (play: ffplay \(ffmpegInput(format).joined(separator: " ")) -i FILE)"
        if let output {
            if output == "-" {
                return SoundSink(
                    format: format, handle: .standardOutput, process: nil, wav: false,
                    announcement: "\(format.label) as S16_LE on stdout\(playHint)\n")
            }
            if !FileManager.default.fileExists(atPath: output) {
                guard FileManager.default.createFile(atPath: output, contents: nil) else {
                    throw CLIFailure("cannot create \(output): check the directory exists and is writable")
                }
            }
            guard let handle = FileHandle(forWritingAtPath: output) else { throw CLIFailure("cannot write \(output): check it is writable") }
            handle.truncateFile(atOffset: 0)
            let wav = output.lowercased().hasSuffix(".wav")
            let sink = SoundSink(
                format: format, handle: handle, process: nil, wav: wav,
                announcement: "writing \(format.label) to \(output)\(wav ? " (WAV)" : playHint)\n")
            if wav { _ = sink.write(WAVHeader.bytes(format: format, dataBytes: 0xFFFF_FFFF - 36)) }
            return sink
        }
        guard let (path, kind) = FrameSink.findPlayer(player) else {
            throw CLIFailure(
                player.map { "cannot find the player \($0) on PATH" }
                    ?? "no player found (ffplay from Debian's ffmpeg, or mpv): install one, or write the sound with -o FILE.wav")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        switch kind {
        case .ffplay:
            process.arguments = ["-hide_banner", "-loglevel", "error", "-nodisp", "-fflags", "nobuffer"] + ffmpegInput(format) + ["-i", "-"]
        case .mpv:
            process.arguments = [
                "--demuxer=rawaudio", "--demuxer-rawaudio-format=s16le", "--demuxer-rawaudio-rate=\(format.sampleRate)",
                "--demuxer-rawaudio-channels=\(format.channels)", "--no-video", "--cache=no", "-",
            ]
        }
        let pipe = Pipe()
        process.standardInput = pipe
        do {
            try process.run()
        } catch {
            throw CLIFailure("cannot start \(path): \(error)")
        }
        signal(SIGPIPE, SIG_IGN)
        return SoundSink(
            format: format, handle: pipe.fileHandleForWriting, process: process, wav: false,
            announcement: "\(format.label) to \(URL(fileURLWithPath: path).lastPathComponent)\n")
    }

    var processID: Int32 { process?.processIdentifier ?? 0 }

    func write(_ part: ZMQMessage) -> Bool { withExtendedLifetime(part) { write(part.bytes) } }

    func write(_ bytes: some DataProtocol) -> Bool {
        do {
            try handle.write(contentsOf: bytes)
            written += UInt64(bytes.count)
            return true
        } catch {
            return false
        }
    }

    func close() {
        // A WAV file says its length once it is known (a FIFO cannot be rewritten: it stays "unknown").
        if wav,
            let header = try? { () throws -> [UInt8] in
                try handle.seek(toOffset: 0)
                return WAVHeader.bytes(format: format, dataBytes: UInt32(clamping: written - 44))
            }()
        {
            try? handle.write(contentsOf: header)
        }
        if process != nil { try? handle.close() } else if handle !== FileHandle.standardOutput { try? handle.close() }
        if let process, process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }
}

/// A canonical 44-byte WAV header for 16-bit PCM.
enum WAVHeader {
    static func bytes(format: AudioFormat, dataBytes: UInt32) -> [UInt8] {
        var out: [UInt8] = []
        func le32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { out += $0 } }
        func le16(_ value: UInt16) { withUnsafeBytes(of: value.littleEndian) { out += $0 } }
        let blockAlign = UInt16(format.channels * 2)
        out += Array("RIFF".utf8)
        le32(dataBytes &+ 36)
        out += Array("WAVEfmt ".utf8)
        le32(16)
        le16(1)
        le16(UInt16(format.channels))
        le32(UInt32(format.sampleRate))
        le32(UInt32(format.sampleRate) * UInt32(blockAlign))
        le16(blockAlign)
        le16(16)
        out += Array("data".utf8)
        le32(dataBytes)
        return out
    }
}
