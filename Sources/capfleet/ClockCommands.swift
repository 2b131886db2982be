import ArgumentParser
import FleetClient
import FleetProtocol
import Foundation

/// `capfleet sync-check`: how closely in fleet time the named devices capture.
struct SyncCheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-check",
        abstract: "Each device's first frame captured at or after a fleet time, and the spread of their capture times.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The devices to compare.", completion: FleetCompletion.deviceIDs) var devices: [String]
    @Option(help: "When: +1.5s (from now, the default +1s), a fleet time in nanoseconds since the epoch, or an ISO 8601 date.")
    var at: String?
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        var query = Capfleet_V1_SyncCheck.with { $0.deviceIds = devices }
        if let at { try Self.parse(at, into: &query) }
        // The call waits for the time asked for, the agents' patience, and a margin (OperatorReplyTime).
        let result = try coordinator.call(.syncCheck(query)).reply.syncCheck
        if json {
            print(try FleetTables.json(JSONViews.SyncCheck(result)))
            return
        }
        print(FleetTables.syncCheck(result))
    }

    static func parse(_ text: String, into query: inout Capfleet_V1_SyncCheck) throws {
        if text.hasPrefix("+") {
            let units: [(String, Double)] = [("ms", 1e6), ("us", 1e3), ("s", 1e9)]
            guard let (suffix, scale) = units.first(where: { text.hasSuffix($0.0) }), let value = Double(text.dropFirst().dropLast(suffix.count)),
                value.isFinite, value >= 0, value * scale <= 60e9
            else {
                throw CLIFailure("cannot read --at \(text): write +1.5s, +250ms (at most a minute ahead), fleet nanoseconds, or an ISO 8601 date")
            }
            query.fromNowNs = UInt64(value * scale)
        } else if let nanoseconds = UInt64(text) {
            query.atFleetTimeNs = nanoseconds
        } else if let date = ISO8601DateFormatter().date(from: text) {
            query.atFleetTimeNs = UInt64(date.timeIntervalSince1970 * 1e9)
        } else {
            throw CLIFailure("cannot read --at \(text): write +1.5s, +250ms, fleet nanoseconds, or an ISO 8601 date like 2026-11-23T14:00:00Z")
        }
    }
}

/// `capfleet sync-audit`: what the cameras' pictures show of the time, against the fleet
/// time stamped on them (proto-docs/clock.md, "Auditing exposures").
struct SyncAuditCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-audit",
        abstract:
            "Read the timecode the cameras film and compare it with the fleet time stamped on their frames, and their exposures with each other.",
        discussion: """
            Each camera must see a timecode: a synthetic camera's agent draws one with \
            --synthetic-overlay timecode@X,Y,W (only comparable when the agent runs on the \
            coordinator's machine). Per camera: the stamp offset (fleet time stamped minus the true \
            time of the exposure) against the stamps' error bound, and |phase| on the alignment grid; \
            across cameras, the exposure spread per frame interval. Every figure is given with the \
            timecode's resolution. The status is 3 when no camera had figures.
            """)
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The cameras to audit.", completion: FleetCompletion.deviceIDs) var devices: [String]
    @Option(help: "How long each camera reads its frames, in seconds (1 to 60).") var seconds: UInt32 = 5
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        guard (1...60).contains(seconds) else { throw ValidationError("--seconds must lie between 1 and 60") }
    }

    func run() throws {
        // The call waits for the audit's length and the agents' answers (OperatorReplyTime).
        let reply = try coordinator.call(
            .syncAudit(
                .with {
                    $0.deviceIds = devices
                    $0.seconds = seconds
                })
        ).reply
        let result = reply.syncAudit
        print(json ? try FleetTables.json(SyncAuditViews.Audit(result)) : SyncAuditViews.show(result))
        if !result.cameras.contains(where: \.status.isOK) { throw ExitCode(3) }
    }
}

/// `capfleet align`: frame alignment on or off, and cameras wired to a trigger line.
struct AlignCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "align",
        abstract: "Steer devices' captures onto the shared fleet-time grid (devices that time their own frames), or stop.",
        discussion: """
            Sensors that can be steered are; triggerable cameras are triggered at every slot \
            (scheduled action commands on PTP-locked GigE Vision cameras). Cameras wired to a \
            trigger line: --trigger-line Line0 --line-source CAMERA makes every other named \
            camera expose on the edges of its Line0, which CAMERA (named too, and aligned as \
            usual) drives with its exposure signal on --output-line (Line1 unless given); \
            --line-source external names a generator the fleet does not run. The wiring is \
            recorded and shown by `capfleet device`.
            """)
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The devices.", completion: FleetCompletion.deviceIDs) var devices: [String]
    @Flag(help: "Stop aligning.") var off = false
    @Option(help: "The input line the cameras expose on (e.g. Line0).") var triggerLine: String?
    @Option(help: "What drives it: a camera's device id, or external.") var lineSource: String?
    @Option(help: "The output line the source camera drives (default Line1).") var outputLine: String?

    func run() throws {
        let reply = try coordinator.call(
            .changeFrameAlignment(
                .with {
                    $0.deviceIds = devices
                    $0.enabled = !off
                    $0.triggerLine = triggerLine ?? ""
                    $0.lineSource = lineSource ?? ""
                    $0.outputLine = outputLine ?? ""
                })
        ).reply
        let wired =
            triggerLine.map { line in
                "; exposing on \(line)'s edges, driven by \(lineSource == "external" ? "an external generator" : lineSource ?? "?")"
            } ?? ""
        print(
            off
                ? "frame alignment off for \(devices.joined(separator: ", "))"
                : "aligning \(devices.joined(separator: ", ")) to the fleet-time grid" + wired
                    + (reply.status.reason.isEmpty ? "" : "; \(reply.status.reason)"))
    }
}
