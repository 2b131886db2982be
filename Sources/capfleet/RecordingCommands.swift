import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import Foundation

/// `capfleet record start|stop`: takes.
struct RecordCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record", abstract: "Start or stop a take: devices recorded from one fleet-time instant.",
        subcommands: [Start.self, Stop.self, Note.self])

    struct Start: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Record devices from one fleet-time instant: each starts with its first frame captured at or after it.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The devices to record.", completion: FleetCompletion.deviceIDs) var devices: [String]
        @Option(help: "The take's name (default: its id).") var name: String?
        @Option(help: "When: +1.5s from now (default: the coordinator's lead time, 1 s), fleet nanoseconds, or an ISO 8601 date.")
        var at: String?
        @Option(
            help:
                "Where the parts are written: agent (each camera's host writes its own; the default unless the coordinator's record_store says otherwise) or coordinator (frames go to the coordinator, which writes them)."
        )
        var store: String?
        @Option(
            help:
                "How raw cameras are stored: raw (as captured), ffv1 (lossless), h264 or hevc (lossy, compact). Default: the coordinator's record_codec (raw). Cameras that deliver MJPEG or H.264 are stored as they come."
        )
        var codec: String?
        @Option(help: "h264/hevc: constant rate factor, 0 (best) to 51 (default 23).") var quality: Int?
        @Option(help: "h264/hevc: average bits a second instead of a quality: 8000000, 8M or 800k.") var bitrate: String?
        @Option(help: "Frames from one key frame to the next (default: ffv1 1, h264/hevc one second's worth).") var gop: Int?
        @Option(
            name: .customLong("codec-for"), parsing: .singleValue,
            help:
                "A codec of its own for one camera: DEVICE=CODEC or DEVICE=CODEC:QUALITY (h264/hevc), e.g. cam-2=ffv1 cam-3=h264:18. Repeat it for more cameras; the others use --codec."
        )
        var codecFor: [String] = []
        @Option(
            help:
                "Certify the take only if the cameras' spread (p99 of their phases on the grid, at each status report) stays within this: 1ms, 250us."
        )
        var requireSpread: String?
        @Option(
            help:
                "Start this long before the instant (5s, 500ms), from what each camera's agent kept: every camera needs that much pre-roll (capfleet preroll)."
        )
        var preRoll: String?
        @Flag(
            help:
                "h264/hevc: steady the picture before encoding it (libavfilter's deshake: costly, up to two cores per 1080p30 camera; capfleet-bench encode measures it). It alters the pixels: raw and ffv1 parts, stills and the live frames keep the camera's own."
        )
        var stabilise = false
        @Flag(help: "Certify the take only if no camera drops a frame, for any reason.") var requireNoDrops = false
        @Flag(help: "Certify the take only if every node's clock stays locked throughout.") var requireLockedClocks = false
        @Flag(help: "Certify the take only if every camera is steered and in phase throughout (capfleet align).") var requireInPhase = false
        @Flag(help: "Print JSON.") var json = false

        /// `cam-2=ffv1`, `cam-3=h264:18`.
        static func deviceEncoding(_ entry: String) throws -> (String, TakeEncoding) {
            let halves = entry.split(separator: "=", maxSplits: 1).map(String.init)
            let spec = halves.count == 2 ? halves[1].split(separator: ":", maxSplits: 1).map(String.init) : []
            guard halves.count == 2, !halves[0].isEmpty, let name = spec.first, let codec = VideoCodec(rawValue: name) else {
                throw CLIFailure(
                    "--codec-for \(entry): write DEVICE=CODEC or DEVICE=CODEC:QUALITY, the codec one of \(VideoCodec.allCases.map(\.rawValue).joined(separator: ", "))"
                )
            }
            var encoding = TakeEncoding(codec: codec)
            if spec.count == 2 {
                guard let quality = Int(spec[1]) else { throw CLIFailure("--codec-for \(entry): the quality is a number, 0 (best) to 51") }
                encoding.quality = quality
            }
            if let problem = encoding.problem {
                throw CLIFailure("--codec-for \(entry): " + problem.replacingOccurrences(of: "--quality and --bitrate are", with: "a quality is"))
            }
            return (halves[0], encoding)
        }

        func run() throws {
            var query = Capfleet_V1_StartRecording.with {
                $0.deviceIds = devices
                $0.name = name ?? ""
            }
            if codec != nil || quality != nil || bitrate != nil || gop != nil || stabilise {
                guard let codecName = codec else { throw CLIFailure("--quality, --bitrate, --gop and --stabilise go with a --codec") }
                guard let chosen = VideoCodec(rawValue: codecName) else {
                    throw CLIFailure("--codec is one of \(VideoCodec.allCases.map(\.rawValue).joined(separator: ", ")), not \(codecName)")
                }
                var encoding = TakeEncoding(codec: chosen, quality: quality, gop: gop ?? 0)
                if let bitrate {
                    guard let bits = BitRate.parse(bitrate) else {
                        throw CLIFailure("--bitrate is bits a second: 8000000, 8M or 800k, not \(bitrate)")
                    }
                    encoding.bitrate = bits
                }
                if stabilise { encoding.stabilisation = .deshake }
                if let problem = encoding.problem { throw CLIFailure(problem) }
                query.encoding = encoding.wire
            }
            for entry in codecFor {
                var (device, own) = try Self.deviceEncoding(entry)
                guard devices.contains(device) else { throw CLIFailure("--codec-for \(entry): \(device) is not among the devices to record") }
                // The take's stabilisation for a camera of its own lossy codec too.
                if stabilise, own.codec.isLossy { own.stabilisation = .deshake }
                query.deviceEncodings[device] = own.wire
            }
            switch store {
            case nil: break
            case "agent"?: query.store = .agent
            case "coordinator"?: query.store = .coordinator
            case let other?: throw CLIFailure("--store is agent or coordinator, not \(other)")
            }
            if let at { try FleetTimeArgument.parse(at, at: &query.atFleetTimeNs, fromNow: &query.fromNowNs) }
            if let requireSpread {
                guard let spread = TakeSyncViews.spreadNanoseconds(requireSpread) else {
                    throw CLIFailure("--require-spread is a time up to a second: 1ms, 250us or 800ns, not \(requireSpread)")
                }
                query.requirements.maxSpreadNs = spread
            }
            if let preRoll {
                guard let milliseconds = PreRollViews.milliseconds(preRoll) else {
                    throw CLIFailure("--pre-roll is a duration up to \(Int(PreRollSettings.maximumSeconds)) s: 5s, 1.5s or 500ms, not \(preRoll)")
                }
                query.preRollMs = milliseconds
            }
            if requireNoDrops { query.requirements.noDrops = true }
            if requireLockedClocks { query.requirements.clocksLocked = true }
            if requireInPhase { query.requirements.inPhase = true }
            // Every agent must confirm; each has the command timeout.
            guard let take = try coordinator.call(.startRecording(query), timeout: 5 + 3 * Double(devices.count)).reply.takes.first else {
                throw CLIFailure("the coordinator started the take but did not describe it")
            }
            if json {
                print(try FleetTables.json(RecordingViews.Take(take)))
            } else {
                let where_ = take.store == "agent" ? "on each device's host" : "on the coordinator"
                let how = TakeEncoding(wire: take.encoding).map { $0.codec == .raw ? "" : " as \($0.summary)" } ?? ""
                let early = take.preRollMs > 0 ? " (\(take.preRollMs) ms of pre-roll)" : ""
                print(
                    "take \(take.id) (\(take.name)) records \(take.devices.map(\.deviceID).joined(separator: ", ")) from fleet time \(take.startFleetNs)\(early), \(where_)\(how)"
                )
                let asked = TakeSyncViews.requirements(query.requirements)
                if !asked.isEmpty { print("it is certified at its end only if it keeps to: \(asked)") }
                print("stop it with: capfleet record stop \(take.id)")
            }
        }
    }

    struct Stop: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "End a take: frames captured at or after the stop instant are not its. Waits until every device's part is stored, each segment closed and its SHA-256 in the index.",
            discussion: """
                Exits 0 when this command stopped the take, and \(Self.alreadyStoppedExitCode) when it was stopped \
                before (by an earlier or a concurrent stop, which is named): nothing changed.
                """)
        static let alreadyStoppedExitCode: Int32 = 4
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The take.", completion: FleetCompletion.takeIDs) var take: String
        @Option(help: "When: now (default), +2s from now, fleet nanoseconds, or an ISO 8601 date.") var at: String?
        @Option(help: "Seconds to wait for the devices' parts to be stored and checksummed.") var wait: Double = 10
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            var query = Capfleet_V1_StopRecording.with {
                $0.takeID = take
                $0.waitMs = UInt32(max(0, min(wait, 600)) * 1000)
            }
            if let at { try FleetTimeArgument.parse(at, at: &query.atFleetTimeNs, fromNow: &query.fromNowNs) }
            // The call waits for the stop instant, `wait` and the agents (OperatorReplyTime).
            let reply = try coordinator.call(.stopRecording(query)).reply
            guard let stopped = reply.takes.first else {
                throw CLIFailure("the coordinator did not describe the take it stopped")
            }
            // An OK with a reason: the take was stopped before this request (TakeHandler.stopRecording).
            if !reply.status.reason.isEmpty {
                if json { print(try FleetTables.json(RecordingViews.Take(stopped))) }
                FileHandle.standardError.write(Data("\(reply.status.reason)\n".utf8))
                throw ExitCode(Self.alreadyStoppedExitCode)
            }
            if json {
                print(try FleetTables.json(RecordingViews.Take(stopped)))
                return
            }
            let uploading = stopped.devices.filter { $0.state != "stopped" && $0.state != "failed" }
            print("take \(stopped.id): \(stopped.state), \(stopped.frames) frames, \(RecordingViews.bytes(stopped.sizeBytes))")
            if !uploading.isEmpty {
                print(
                    "still being stored: \(uploading.map { "\($0.deviceID) (\($0.state))" }.joined(separator: ", ")); see capfleet recordings show \(stopped.id)"
                )
            }
        }
    }
}

extension RecordCommand {
    struct Note: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add your own timed metadata to a take (a location, a slate, a marker): one JSON object, in the index and in the files.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The take.", completion: FleetCompletion.takeIDs) var take: String
        @Argument(help: "One JSON object, e.g. '{\"location\":\"stage 2\"}'; \"kind\" defaults to \"note\".") var json: String
        @Option(help: "Only this device's files (default: every device of the take).", completion: FleetCompletion.deviceIDs) var device: String?
        @Option(help: "When: now (default), fleet nanoseconds, or an ISO 8601 date.") var at: String?

        func run() throws {
            var query = Capfleet_V1_NoteRecording.with {
                $0.takeID = take
                $0.json = json
                $0.deviceID = device ?? ""
            }
            if let at {
                var fromNow: UInt64 = 0
                try FleetTimeArgument.parse(at, at: &query.atFleetTimeNs, fromNow: &fromNow)
                guard fromNow == 0 else { throw CLIFailure("--at for a note is a fleet time or a date, not a time from now") }
            }
            _ = try coordinator.call(.noteRecording(query))
            print("noted in take \(take)" + (device.map { " for \($0)" } ?? ""))
        }
    }
}

/// `capfleet recordings list|show|sets|collect|offload|export|verify|delete`.
struct RecordingsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recordings", abstract: "List, show, pair, collect, offload, export, verify and delete takes.",
        subcommands: [List.self, Show.self, Sets.self, Collect.self, Offload.self, Export.self, Verify.self, Delete.self],
        defaultSubcommand: List.self)

    struct Offload: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Copy a take to a storage destination (capfleet storage add): each host sends its own segments straight there, each proved by its SHA-256; goes on from what is there already."
        )
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The take.", completion: FleetCompletion.takeIDs) var take: String
        @Option(help: "The storage destination's name (capfleet storage list).") var to: String
        @Flag(help: "Start the copying and return at once (recordings show follows it).") var noWait = false
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            let progress = TransferProgressDisplay(label: "offload \(take) to \(to)", json: json || noWait)
            let info = try coordinator.session().offloadTake(take, to: to, wait: !noWait, progress: progress.follow)
            let offload = info.offloads.first { $0.destination == to }
            if json {
                print(try FleetTables.json(RecordingViews.Take(info, detailed: true)))
            } else if noWait {
                print("offloading take \(take) to \(to); follow it with capfleet recordings show \(take)")
            } else {
                print(
                    "take \(take) offloaded to \(to): \(offload?.verified ?? 0) segments, \(RecordingViews.bytes(offload?.verifiedBytes ?? 0)), every SHA-256 proved there"
                        + (offload.map { $0.indexPath.isEmpty ? "" : "; its index is \($0.indexPath)" } ?? ""))
            }
        }
    }

    struct Collect: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Copy a take's segments from the agents that recorded them to the coordinator, checking each against its SHA-256; resumes where an earlier collect stopped."
        )
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The take.", completion: FleetCompletion.takeIDs) var take: String
        @Option(help: "Where to: coordinator (the only place for now).") var to: String = "coordinator"
        @Flag(help: "Start the copying and return at once (recordings show follows it).") var noWait = false
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            guard to == "coordinator" else { throw CLIFailure("--to coordinator is the only destination: export copies a take anywhere else") }
            let progress = TransferProgressDisplay(label: "collect \(take)", json: json || noWait)
            let info = try coordinator.session().collectTake(take, wait: !noWait, progress: progress.follow)
            if json {
                print(try FleetTables.json(RecordingViews.Take(info, detailed: true)))
            } else if noWait {
                print(
                    "collecting take \(take): \(RecordingViews.bytes(info.agentHeldBytes)) on agents; follow it with capfleet recordings show \(take)"
                )
            } else {
                print(
                    "take \(take) collected: \(RecordingViews.bytes(info.collectedBytes)) copied to the coordinator, every SHA-256 matches the index")
            }
        }
    }

    struct List: ParsableCommand {
        // Named, not derived from the type: the help dump (and so the manual page) names a
        // default subcommand only by its configured name.
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Every take, newest first.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            let takes = try coordinator.call(.listRecordings(.init())).reply.takes
            print(json ? try FleetTables.json(takes.map { RecordingViews.Take($0) }) : RecordingViews.list(takes))
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A take per device: format, first and last fleet times, frames, bytes, drops by reason, segments; and its events.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The take.", completion: FleetCompletion.takeIDs) var take: String
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            guard let info = try coordinator.call(.getRecording(.with { $0.takeID = take })).reply.takes.first else {
                throw CLIFailure("the coordinator did not describe take \(take)")
            }
            print(json ? try FleetTables.json(RecordingViews.Take(info, detailed: true)) : RecordingViews.show(info))
        }
    }

    struct Sets: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Pair a take's frames: for each slot of the grid, the nearest frame of every camera and its offset; sets incomplete or over a tolerance listed."
        )
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The take.", completion: FleetCompletion.takeIDs) var take: String
        @Option(help: "A set whose spread is above this is marked: 2ms, 500us (default: the take's --require-spread, else 1ms).")
        var tolerance: String?
        @Option(help: "The slots' spacing: 33.3ms (default: the slowest camera's frame interval).") var interval: String?
        @Flag(help: "List every set, not only those incomplete or over the tolerance.") var all = false
        @Option(help: "Sets listed at most (up to 10000).") var limit: UInt32 = 100
        @Option(help: "List sets from this slot on (fleet ns, as the SLOT column shows).") var from: UInt64 = 0
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            let toleranceNs = try tolerance.map { try RecordingsCommand.nanoseconds($0, option: "--tolerance") } ?? 0
            let intervalNs = try interval.map { try RecordingsCommand.nanoseconds($0, option: "--interval") } ?? 0
            let session = try coordinator.session()
            // Sets are read from the coordinator's copies: segments only on agents come first.
            try RecordingsCommand.collectFirst(take, in: session, json: json)
            let sets = try session.call(
                .getFrameSets(
                    .with {
                        $0.takeID = take
                        $0.toleranceNs = toleranceNs
                        $0.intervalNs = intervalNs
                        $0.limit = limit
                        $0.all = all
                        $0.fromFleetNs = from
                    })
            ).reply.frameSets
            print(json ? try FleetTables.json(FrameSetViews.Sets(take: take, sets)) : FrameSetViews.text(take: take, sets, all: all))
        }
    }

    /// Copies what only the agents hold of `take` to the coordinator, following the copy.
    static func collectFirst(_ take: String, in session: OperatorSession, json: Bool) throws {
        guard let info = try session.call(.getRecording(.with { $0.takeID = take })).reply.takes.first, info.agentHeldBytes > 0 else { return }
        if !json { print("collecting \(RecordingViews.bytes(info.agentHeldBytes)) from the agents first") }
        let collecting = TransferProgressDisplay(label: "collect \(take)", json: json)
        try session.collectTake(take, progress: collecting.follow)
    }

    /// A duration option (1ms, 250us, 800ns, 0.5s) in ns, or a failure naming the option.
    static func nanoseconds(_ text: String, option: String) throws -> UInt64 {
        guard let value = TakeSyncViews.spreadNanoseconds(text) else {
            throw CLIFailure("\(option) \(text): give a duration above 0 and at most a second, e.g. 2ms, 500us or 0.04s")
        }
        return value
    }

    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy a take's files into a directory (DIR/DEVICE/DEVICE-NNNN.mkv), checking each against its SHA-256.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The take.", completion: FleetCompletion.takeIDs) var take: String
        @Option(help: "Where to put the files.") var to: String
        @Option(help: "Seconds to wait for checksums the coordinator is still computing (segments just finished).") var wait: Double = 60
        @Flag(help: "Also write DIR/frame-sets.csv: the take's frames paired slot by slot (see `recordings sets`).") var frameSets = false
        @Option(help: "With --frame-sets: the tolerance a set's spread is marked above (default: the take's --require-spread, else 1ms).")
        var tolerance: String?
        @Option(help: "With --frame-sets: the slots' spacing (default: the slowest camera's frame interval).") var interval: String?
        @Flag(
            help:
                "Also write DIR/muxed/CAMERA-NNNN.mkv: each camera segment with its microphones' sound over the same span, on one timeline (needs ffmpeg)."
        )
        var mux = false
        @Option(
            name: .customLong("microphone"),
            help: "With --mux: a microphone to put with the cameras (default: every one of the take); repeat for more.")
        var microphones: [String] = []
        @Flag(
            help:
                "Also write DIR/framed/CAMERA-NNNN.mkv: each auto-framed camera segment cut to its crops as the framer made them live, scaled to one size, H.264 (needs ffmpeg)."
        )
        var framed = false
        @Option(help: "With --framed: the reframed pictures' size, WxH (default: 1280 wide, or the camera's width, in its shape).")
        var framedSize: String?
        @Flag(help: "Print a JSON summary.") var json = false

        func run() throws {
            guard mux || microphones.isEmpty else { throw CLIFailure("--microphone chooses what --mux puts with the cameras: add --mux") }
            guard framed || framedSize == nil else { throw CLIFailure("--framed-size is the size of what --framed makes: add --framed") }
            var reframedSize: (width: Int, height: Int)?
            if let framedSize {
                let sides = framedSize.lowercased().split(separator: "x").compactMap { Int($0) }
                guard sides.count == 2, (16...8192).contains(sides[0]), (16...8192).contains(sides[1]), sides[0] % 2 == 0, sides[1] % 2 == 0 else {
                    throw CLIFailure("--framed-size \(framedSize): write WxH with even sides from 16 to 8192, e.g. 1280x720")
                }
                reframedSize = (sides[0], sides[1])
            }
            let toleranceNs = try tolerance.map { try RecordingsCommand.nanoseconds($0, option: "--tolerance") }
            let intervalNs = try interval.map { try RecordingsCommand.nanoseconds($0, option: "--interval") }
            let session = try coordinator.session()
            // Segments only on agents' disks come to the coordinator first.
            try RecordingsCommand.collectFirst(take, in: session, json: json)
            let progress = TransferProgressDisplay(label: "export \(take)", json: json)
            var exported = try session.exportTake(
                take, to: to, checksumPolls: Int(max(0, min(wait, 3600)) * 4),
                progress: progress.follow)
            if frameSets {
                exported.files.append(
                    try FrameSetViews.writeCSV(
                        take: exported.info, exportedFiles: exported.files, directory: to, interval: intervalNs, tolerance: toleranceNs))
            }
            if framed {
                do {
                    let jobs = try TakeReframe.plan(take: exported.info, directory: to, size: reframedSize)
                    if jobs.isEmpty, !json {
                        print(
                            "no camera of take \(take) was auto-framed with a crop (capfleet detect CAMERA --framing): nothing to reframe (a camera framed by its own optics recorded the framed picture itself)"
                        )
                    }
                    for job in jobs {
                        try TakeReframe.run(job)
                        exported.files.append(job.output)
                    }
                } catch let error as TakeMuxError {
                    throw CLIFailure(error.description)
                }
            }
            if mux {
                do {
                    for job in try TakeMux.plan(take: exported.info, directory: to, microphones: microphones) {
                        try TakeMux.run(job)
                        exported.files.append(job.output)
                    }
                } catch let error as TakeMuxError {
                    throw CLIFailure(error.description)
                }
            }
            if json {
                print(
                    try FleetTables.json([
                        "take": take, "files": exported.files.joined(separator: "\n"), "bytes": String(exported.bytes),
                        "still_open": exported.stillOpen.joined(separator: "\n"),
                    ]))
            } else {
                print("exported \(exported.files.count) file(s), \(RecordingViews.bytes(exported.bytes)), to \(to); every SHA-256 matches the index")
                if !exported.stillOpen.isEmpty {
                    // Said, never left out silently: the take is not whole on this disk yet.
                    print(
                        "not exported, still being written: \(exported.stillOpen.joined(separator: ", ")); export again once `capfleet recordings show \(take)` says stopped"
                    )
                }
            }
        }
    }

    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Check a take: every frame accounted for, and each file's size, SHA-256, frame count, timestamps and sequences against the index.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The take.", completion: FleetCompletion.takeIDs) var take: String
        @Flag(help: "Print JSON.") var json = false

        struct Result: Encodable {
            var take: String
            var ok: Bool
            var segments: Int
            var frames: UInt64
            var problems: [String]

            enum CodingKeys: String, CodingKey {
                case take, ok, segments, frames, problems
            }
        }

        func run() throws {
            let session = try coordinator.session()
            guard let info = try session.call(.getRecording(.with { $0.takeID = take })).reply.takes.first else {
                throw CLIFailure("the coordinator did not describe take \(take)")
            }
            var problems = try session.call(.verifyRecording(.with { $0.takeID = take })).reply.verification.problems
            var frames: UInt64 = 0
            let progress = TransferProgressDisplay(total: UInt64(info.segments.count), label: "verify \(take)", unit: "segments", json: json)
            for (index, segment) in info.segments.enumerated() {
                // One file a request: checksumming a 5-minute segment takes a while.
                let result = try session.call(
                    .verifyRecording(
                        .with {
                            $0.takeID = take
                            $0.deviceID = segment.deviceID
                            $0.segmentNumber = segment.number
                        }), timeout: max(coordinator.timeout, 180)
                ).reply.verification
                problems += result.problems
                frames += result.frames
                progress.show(UInt64(index + 1))
            }
            progress.finish()
            let result = Result(take: take, ok: problems.isEmpty, segments: info.segments.count, frames: frames, problems: problems)
            if json {
                print(try FleetTables.json(result))
            } else if problems.isEmpty {
                print("take \(take) verified: \(info.segments.count) segment(s), \(frames) frames; every frame accounted for, files match the index")
            } else {
                print("take \(take): \(problems.count) problem(s)")
                for problem in problems { print("  - \(problem)") }
            }
            if !problems.isEmpty { throw ExitCode(2) }
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a stopped take: its files and its index entries.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The take.", completion: FleetCompletion.takeIDs) var take: String

        func run() throws {
            _ = try coordinator.call(.deleteRecording(.with { $0.takeID = take }), timeout: 30)
            print("take \(take) deleted")
        }
    }
}

/// `--at` for takes: +1.5s from now, fleet nanoseconds, or an ISO 8601 date.
enum FleetTimeArgument {
    static func parse(_ text: String, at: inout UInt64, fromNow: inout UInt64) throws {
        var query = Capfleet_V1_SyncCheck()
        try SyncCheckCommand.parse(text, into: &query)
        at = query.atFleetTimeNs
        fromNow = query.fromNowNs
    }
}
