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
            frees it all. Needs each camera's lease (capfleet lock); stored, pushed again when \
            the agent registers, audited.
            """)
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The cameras and microphones, then the duration to keep (omit it to show).", completion: FleetCompletion.deviceIDs) var words:
        [String]
    @Option(help: "The memory each camera's pre-roll may use, MiB (default 256).") var budget: Int?
    @Flag(help: "Keep nothing.") var off = false
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        if let budget, budget < 1 { throw ValidationError("--budget is MiB, at least 1") }
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
