import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import Foundation

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

/// `capfleet moments [list] | export MOMENT --to DIR`.
struct MomentsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "moments", abstract: "List the moments, or export one: its take and its still together.",
        subcommands: [List.self, Export.self], defaultSubcommand: List.self)

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "Every moment, the latest first: its instant, cameras, take, still and what took it.")
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

    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Copy a moment's take (DIR/take/DEVICE/…mkv) and still (DIR/still/DEVICE-N.png and sidecars) into one directory, with DIR/moment.json; every file checked against its SHA-256."
        )
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The moment.") var moment: String
        @Option(help: "Where to put the files.") var to: String
        @Option(help: "Seconds to wait for checksums and pictures still being copied from the agents.") var wait: Double = 60
        @Flag(help: "Print a JSON summary.") var json = false

        func run() throws {
            let session = try coordinator.session()
            guard let found = try session.call(.listMoments(.init())).reply.moments.first(where: { $0.id == moment }) else {
                throw CLIFailure("no moment \(moment); capfleet moments lists them")
            }
            let polls = Int(max(0, min(wait, 3600)) * 4)
            try RecordingsCommand.collectFirst(found.takeID, in: session, json: json)
            let progress = TransferProgressDisplay(label: "export \(found.takeID)", json: json)
            let take = try session.exportTake(found.takeID, to: to + "/take", checksumPolls: polls, progress: progress.follow)
            let still = try session.exportStill(found.stillID, to: to + "/still", polls: polls)
            let index = to + "/moment.json"
            let described = try FleetTables.json(MomentViews.Moment(found, take: take.info, still: still.still))
            do {
                try Data((described + "\n").utf8).write(to: URL(fileURLWithPath: index))
            } catch {
                throw CLIFailure("cannot write \(index): \(error.localizedDescription); check that \(to) is writable")
            }
            let files = take.files + still.files + [index]
            if json {
                print(
                    try FleetTables.json([
                        "moment": found.id, "files": files.joined(separator: "\n"), "bytes": String(take.bytes + still.bytes),
                        "still_open": take.stillOpen.joined(separator: "\n"), "missing_pictures": still.missing.joined(separator: "\n"),
                    ]))
            } else {
                print(
                    "exported moment \(found.id): \(take.files.count) take file(s) and \(still.files.count / 2) picture(s), \(RecordingViews.bytes(take.bytes + still.bytes)), to \(to); every SHA-256 matches the index"
                )
                if !take.stillOpen.isEmpty { print("not exported, still being written: \(take.stillOpen.joined(separator: ", "))") }
                for missing in still.missing { print("no picture: \(missing)") }
            }
        }
    }
}
