import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol

/// `capfleet moment-rule add|list|remove` (recordings.md, "Moments by rule"): moments taken when
/// a code or a face appears in a camera's detections, or a sensor stream's sample says so.
struct MomentRuleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "moment-rule", abstract: "Take moments when a code or a face appears, or a sensor's sample says so.",
        discussion: """
            A rule watches one camera's detections (set them with capfleet detect) or one sensor \
            stream's samples, and takes a moment (capfleet moment) at the instant of the frame or \
            sample that showed what it waits for: the still from that frame, the take from --before \
            it to --after it. Its cameras must keep a pre-roll longer than --before (capfleet \
            preroll), since the instant is already past when the rule hears of it. A code held in \
            view is one moment; it fires again once it was gone for --rearm.
            """,
        subcommands: [Add.self, List.self, Remove.self], defaultSubcommand: List.self)

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a rule, or replace the one of that name.",
            discussion: """
                capfleet moment-rule add line-a --on cam-1 --code --value part-17
                capfleet moment-rule add visitor --on cam-1 --face --all --after 5s
                capfleet moment-rule add gpio --on sen-1a2b3c4d-lines --channel line0 --above 0.5 cam-1 cam-2
                """)
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "Its name: a-z, 0-9, - and _.") var name: String
        @Argument(help: "The cameras its moments take (default: the camera watched).", completion: FleetCompletion.deviceIDs)
        var cameras: [String] = []
        @Option(help: "The camera or sensor stream watched.", completion: FleetCompletion.deviceIDs) var on: String
        @Flag(help: "A code appears (with --value and --symbology to narrow it).") var code = false
        @Option(help: "With --code: only a code saying exactly this.") var value: String?
        @Option(help: "With --code: only this symbology (qr, ean13, code128, …).") var symbology: String?
        @Flag(help: "A face appears.") var face = false
        @Option(help: "A sample's channel, with --above or --below.") var channel: String?
        @Option(help: "The channel's value is above this.") var above: Double?
        @Option(help: "The channel's value is below this.") var below: Double?
        @Option(help: "A sample's text is exactly this.") var text: String?
        @Flag(help: "Every online camera whose consent is granted.") var all = false
        @Option(help: "How long before the instant the take starts: 1.5s (default), at most 60s.") var before: String?
        @Option(help: "How long after the instant it stops: 1.5s (default), at most 60s.") var after: String?
        @Option(help: "How long what it waits for must be gone before it fires again: 1s (default), at most 3600s.") var rearm: String?
        @Flag(help: "JPEG pictures instead of PNG.") var jpeg = false
        @Flag(help: "Print JSON.") var json = false

        func validate() throws {
            let chosen = [code, face, above != nil, below != nil, text != nil].filter { $0 }.count
            guard chosen == 1 else {
                throw ValidationError("say what the rule waits for, once: --code, --face, --channel NAME --above X or --below X, or --text TEXT")
            }
            if (above != nil || below != nil) != (channel != nil) {
                throw ValidationError(channel == nil ? "--above and --below need --channel NAME" : "--channel goes with --above or --below")
            }
            if !code, value != nil || symbology != nil { throw ValidationError("--value and --symbology narrow --code") }
            if all, !cameras.isEmpty { throw ValidationError("give either --all or cameras, not both") }
            for (option, text, maximum) in [
                ("--before", before, MomentRule.maximumSideMs), ("--after", after, MomentRule.maximumSideMs),
                ("--rearm", rearm, MomentRule.maximumRearmMs),
            ] {
                if let text, MomentViews.milliseconds(text, maximumMs: maximum) == nil {
                    throw ValidationError("\(option) is a duration from 1ms to \(maximum / 1000)s, such as 1.5s or 500ms, not \(text)")
                }
            }
        }

        func run() throws {
            let rule = Capfleet_V1_MomentRule.with {
                $0.name = name
                $0.sourceDeviceID = on
                if code {
                    $0.on = .code
                    $0.value = value ?? ""
                    $0.symbology = symbology ?? ""
                } else if face {
                    $0.on = .face
                } else if let above {
                    $0.on = .above
                    $0.level = above
                } else if let below {
                    $0.on = .below
                    $0.level = below
                } else if let text {
                    $0.on = .text
                    $0.text = text
                }
                $0.channel = channel ?? ""
                $0.deviceIds = cameras
                $0.all = all
                $0.beforeMs = before.flatMap { MomentViews.milliseconds($0, maximumMs: MomentRule.maximumSideMs) } ?? 0
                $0.afterMs = after.flatMap { MomentViews.milliseconds($0, maximumMs: MomentRule.maximumSideMs) } ?? 0
                $0.rearmMs = rearm.flatMap { MomentViews.milliseconds($0, maximumMs: MomentRule.maximumRearmMs) } ?? 0
                $0.encoding = jpeg ? .jpeg : .png
            }
            let kept = try coordinator.call(.changeMomentRule(.with { $0.rule = rule })).reply.momentRules
            guard let info = kept.first else { throw CLIFailure("the coordinator kept rule \(name) but did not describe it") }
            print(json ? try FleetTables.json(MomentViews.Rule(info)) : MomentViews.rule(info))
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Every rule: what it waits for, what it takes, and what it has done.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            let rules = try coordinator.call(.listMomentRules(.init())).reply.momentRules
            if json {
                print(try FleetTables.json(rules.map(MomentViews.Rule.init)))
            } else {
                print(
                    rules.isEmpty
                        ? "no moment rules (capfleet moment-rule add NAME --on CAMERA --code)" : rules.map(MomentViews.rule).joined(separator: "\n"))
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a rule; moments it took stay.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The rule.") var name: String

        func run() throws {
            _ = try coordinator.call(
                .changeMomentRule(
                    .with {
                        $0.rule.name = name
                        $0.remove = true
                    }))
            print("moment rule \(name) removed")
        }
    }
}
