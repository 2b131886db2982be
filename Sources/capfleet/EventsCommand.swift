import ArgumentParser
import FleetBus
import FleetClient
import FleetCore
import FleetProtocol
import Foundation

struct EventsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract:
            "The fleet's recent events (nodes online/offline, devices interrupted/resumed, pressure, policies, leases); --follow streams new ones.",
        discussion: """
            With --json the recent events are one JSON array, as every listing prints; with --follow \
            as well, every event (the recent ones, then each new one as it happens) is one JSON object \
            on a line of its own (JSON Lines), so a reader can act on each at once.
            """)
    @OptionGroup var coordinator: CoordinatorOptions
    @Option(help: "How many recent events to show first (at most 1000; 0 for none).") var limit: UInt32 = 20
    @Flag(help: "Keep streaming events as they happen, until Ctrl-C.") var follow = false
    @Option(help: "With --follow: stop after this many new events.") var count: Int?
    @Option(help: "The coordinator's telemetry port, for --follow (default: the one the coordinator names).") var telemetryPort: UInt16?
    @Flag(help: "Print JSON: an array, or with --follow one object per line.") var json = false

    func run() throws {
        let client = try coordinator.client()
        // Subscribe before asking for the recent ones, so nothing falls between the two.
        var subscriber: ZMQSocket?
        if follow {
            subscriber = try TelemetrySubscription.open(coordinator, client: client, port: telemetryPort, topic: TelemetryTopic.eventPrefix)
        }
        var recent: [Capfleet_V1_FleetEvent] = []
        if limit > 0 {
            do {
                recent = try client.call(.getEvents(.with { $0.limit = limit })).reply.events
            } catch {
                throw CLIFailure(error.description)
            }
        }
        if json && !follow {
            print(try FleetTables.json(recent.map(Self.view)))
            return
        }
        for event in recent { print(try line(event)) }
        fflush(nil)
        guard let subscriber else { return }
        let shown = Set(recent.map(Self.key))
        var followed = 0
        while count.map({ followed < $0 }) ?? true {
            guard subscriber.waitForInput(milliseconds: 500),
                let message = try? subscriber.receiveMultipart(dontWait: true), message.parts.count == 2,
                let event = try? Capfleet_V1_FleetEvent(serializedBytes: message.parts[1].array)
            else { continue }
            guard !shown.contains(Self.key(event)) else { continue }
            print(try line(event))
            fflush(nil)
            followed += 1
        }
    }

    static func key(_ event: Capfleet_V1_FleetEvent) -> String {
        "\(event.unixMs)|\(event.kind.rawValue)|\(event.nodeID)|\(event.deviceID)|\(event.message)"
    }

    /// An event as JSON: alerts also name their rule and how many like it were held back.
    struct View: Encodable {
        var unixMs: Int64
        var kind, nodeId, deviceId, message: String
        var alert: String?
        var suppressed: UInt32?

        enum CodingKeys: String, CodingKey {
            case unixMs = "unix_ms", kind, nodeId = "node_id", deviceId = "device_id", message, alert, suppressed
        }
    }

    static func view(_ event: Capfleet_V1_FleetEvent) -> View {
        let isAlert = event.kind == .alert
        return View(
            unixMs: event.unixMs, kind: event.kind.topicSuffix, nodeId: event.nodeID, deviceId: event.deviceID, message: event.message,
            alert: isAlert ? event.alert.name : nil, suppressed: isAlert ? event.suppressed : nil)
    }

    func line(_ event: Capfleet_V1_FleetEvent) throws -> String {
        if json { return try FleetTables.jsonLine(Self.view(event)) }
        let subject = [event.nodeID, event.deviceID].filter { !$0.isEmpty }.joined(separator: " ")
        let kind = event.kind == .alert ? "alert:" + event.alert.name : event.kind.topicSuffix
        return "\(FleetTables.clock(event.unixMs))  \(kind.padding(toLength: 22, withPad: " ", startingAt: 0))  \(subject)  \(event.message)"
    }
}
