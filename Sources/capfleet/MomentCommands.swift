import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol

/// `capfleet moment CAMERAS|--all [--before 1.5s] [--after 1.5s]`: the fleet's Live Photo
/// (recordings.md, "Moments").
struct MomentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "moment",
        abstract: "A still of every camera at one instant, and a take from before it to after it, linked.",
        discussion: """
            The instant is the coordinator's lead time from now. Each camera's picture comes from \
            its stream as it runs (nothing switches format), and the take runs from --before the \
            instant (from what each camera's agent kept: give each a pre-roll at least that long \
            with capfleet preroll) to --after it. Answered once the take is stored; \
            `capfleet moments` lists them, `capfleet stills show` and `capfleet recordings show` \
            show the still and the take.
            """)
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The cameras.", completion: FleetCompletion.deviceIDs) var devices: [String] = []
    @Flag(help: "Every online camera whose consent is granted.") var all = false
    @Option(help: "How long before the instant the take starts: 1.5s (default), 500ms, at most 60s.") var before: String?
    @Option(help: "How long after the instant it stops: 1.5s (default), at most 60s.") var after: String?
    @Option(help: "Its name (default: its id).") var name: String?
    @Flag(help: "JPEG pictures instead of PNG.") var jpeg = false
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        guard all != !devices.isEmpty else {
            throw ValidationError(all ? "give either --all or cameras, not both" : "name the cameras, or give --all")
        }
        for (option, value) in [("--before", before), ("--after", after)] {
            if let value, PreRollViews.milliseconds(value) == nil {
                throw ValidationError("\(option) is a duration up to \(Int(PreRollSettings.maximumSeconds)) s: 1.5s or 500ms, not \(value)")
            }
        }
    }

    func run() throws {
        let query = Capfleet_V1_TakeMoment.with {
            $0.deviceIds = devices
            $0.all = all
            $0.beforeMs = before.flatMap(PreRollViews.milliseconds) ?? 0
            $0.afterMs = after.flatMap(PreRollViews.milliseconds) ?? 0
            $0.name = name ?? ""
            $0.encoding = jpeg ? .jpeg : .png
        }
        let answer = try coordinator.call(.takeMoment(query))
        guard let moment = answer.reply.moments.first else { throw CLIFailure("the coordinator took the moment but did not describe it") }
        if json {
            print(try FleetTables.json(MomentViews.Moment(moment, take: answer.reply.takes.first, still: answer.reply.stills.first)))
        } else {
            print(MomentViews.summary(moment))
            if !answer.reply.status.reason.isEmpty { print(answer.reply.status.reason) }
        }
    }
}

/// `capfleet moments`: every moment, the latest first.
struct MomentsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "moments", abstract: "List the moments: their instant, cameras, take and still.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let moments = try coordinator.call(.listMoments(.init())).reply.moments
        if json {
            print(try FleetTables.json(moments.map { MomentViews.Moment($0, take: nil, still: nil) }))
        } else {
            print(moments.isEmpty ? "no moments yet (capfleet moment CAMERAS)" : moments.map(MomentViews.summary).joined(separator: "\n"))
        }
    }
}
