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

/// `capfleet align`: software frame alignment on or off.
struct AlignCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "align",
        abstract: "Steer devices' captures onto the shared fleet-time grid (devices that time their own frames), or stop.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The devices.", completion: FleetCompletion.deviceIDs) var devices: [String]
    @Flag(help: "Stop aligning.") var off = false

    func run() throws {
        let reply = try coordinator.call(
            .changeFrameAlignment(
                .with {
                    $0.deviceIds = devices
                    $0.enabled = !off
                })
        ).reply
        print(
            off
                ? "frame alignment off for \(devices.joined(separator: ", "))"
                : "aligning \(devices.joined(separator: ", ")) to the fleet-time grid"
                    + (reply.status.reason.isEmpty ? "" : "; \(reply.status.reason)"))
    }
}
