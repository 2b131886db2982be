import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol

/// `capfleet preroll CAMERA... [DURATION | --off]`: how much of cameras' recent past their
/// agents keep, so that `record start --pre-roll` can begin before it was asked for
/// (recordings.md, "Pre-roll").
struct PreRollCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "preroll",
        abstract: "Show or set how much of cameras' and microphones' recent past their agents keep for takes that start in the past.",
        discussion: """
            DURATION (5s, 1.5s, 500ms; at most 60 s) is kept of each camera's frames (a \
            microphone's sound), as a take would record them, within --budget of its agent's memory (the time kept shrinks to \
            fit: capfleet preroll CAMERA shows what is kept). `capfleet record start CAMERAS \
            --pre-roll 5s` then starts the take 5 s before its instant on every camera and microphone. --off \
            frees it all. --codec h264 (hevc, ffv1) keeps a camera's pre-roll encoded on its host: \
            ten to a hundred times as long in the same memory, one encoder per camera running as long \
            as the pre-roll does; a take reaching into it records that stream (from the key frame on \
            the whole fleet second before its start) and a take in the same codec taps it instead of \
            encoding again. --disk MiB keeps what an encoded pre-roll's memory budget lets go of \
            the duration in files on its host, within that much disk. Needs each camera's lease (capfleet lock); stored, pushed again when \
            the agent registers, audited.
            """)
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The cameras and microphones, then the duration to keep (omit it to show).", completion: FleetCompletion.deviceIDs) var words:
        [String]
    @Option(help: "The memory each camera's pre-roll may use, MiB (default 256).") var budget: Int?
    @Flag(help: "Keep nothing.") var off = false
    @Option(help: "Keep cameras' pre-roll encoded on their hosts: h264, hevc (lossy, compact) or ffv1 (lossless). Default: raw frames.")
    var codec: String?
    @Option(help: "h264/hevc: constant rate factor, 0 (best) to 51 (default 23).") var quality: Int?
    @Option(help: "h264/hevc: average bits a second instead of a quality: 8000000, 8M or 800k.") var bitrate: String?
    @Option(
        help: "Frames from one key frame to the next (default: ffv1 1, h264/hevc one second's worth); key frames also open every whole fleet second.")
    var gop: Int?
    @Option(help: "With --codec: disk on the camera's host for what the memory budget lets go of the duration, MiB (default none).")
    var disk: Int?
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        if let budget, budget < 1 { throw ValidationError("--budget is MiB, at least 1") }
        if let disk, disk < 1 { throw ValidationError("--disk is MiB, at least 1") }
    }

    /// The encoding asked for; nil: raw frames.
    func encoding() throws -> TakeEncoding? {
        guard let codec else {
            if quality != nil || bitrate != nil || gop != nil { throw CLIFailure("--quality, --bitrate and --gop go with a --codec") }
            return nil
        }
        guard let chosen = VideoCodec(rawValue: codec), chosen != .raw else {
            throw CLIFailure("--codec is one of ffv1, h264, hevc, not \(codec) (leave it out to keep raw frames)")
        }
        var encoding = TakeEncoding(codec: chosen, quality: quality, gop: gop ?? 0)
        if let bitrate {
            guard let bits = BitRate.parse(bitrate) else { throw CLIFailure("--bitrate \(bitrate): write bits a second, e.g. 8000000, 8M or 800k") }
            encoding.bitrate = bits
        }
        if let problem = encoding.problem { throw CLIFailure(problem) }
        return encoding
    }

    func run() throws {
        var devices = words
        var milliseconds: UInt32?
        if let last = words.last, let parsed = PreRollViews.milliseconds(last) {
            milliseconds = parsed
            devices.removeLast()
        }
        if off {
            guard milliseconds == nil else { throw CLIFailure("a duration or --off, not both") }
            milliseconds = 0
        }
        guard !devices.isEmpty else { throw CLIFailure("name the cameras, e.g. capfleet preroll cam-1 5s") }
        let encoding = try encoding()
        if encoding != nil, milliseconds == nil || milliseconds == 0 {
            throw CLIFailure("--codec goes with a duration to keep, e.g. capfleet preroll cam-1 30s --codec h264")
        }
        if disk != nil, encoding == nil {
            throw CLIFailure(
                "--disk keeps an encoded pre-roll's packets: add --codec h264 (raw frames would write the camera's whole pixel rate to disk)")
        }
        var entries: [PreRollViews.Entry] = []
        for device in devices {
            let shown: Capfleet_V1_PreRoll
            if let milliseconds {
                shown =
                    try coordinator.call(
                        .changePreRoll(
                            .with {
                                $0.deviceID = device
                                $0.milliseconds = milliseconds
                                $0.budgetBytes = UInt64(budget ?? 0) << 20
                                if let encoding { $0.encoding = encoding.wire }
                                $0.diskBudgetBytes = UInt64(disk ?? 0) << 20
                            }), timeout: 10
                    ).reply.preRoll
            } else {
                guard let info = try coordinator.call(.getDevice(.with { $0.deviceID = device })).reply.devices.first else {
                    throw CLIFailure("no device \(device)")
                }
                shown = info.preRoll
            }
            entries.append(PreRollViews.Entry(device: device, shown))
            if !json { print("\(device) pre-roll \(PreRollViews.summary(shown))") }
        }
        if json { print(try FleetTables.json(entries)) }
    }
}
