import FleetBus
import FleetHTTP
import Foundation
import Hummingbird
import Logging
import NIOCore
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension SecondLaneIntegrationTests {
    /// Alerts from a real coordinator and agent, handed to a webhook receiver in this test
    /// and to a shell command, with rate limiting.
    @Suite struct AlertsTests {
        /// Alerts the webhook received, decoded.
        final class Receiver: Sendable {
            final class Inbox: Sendable { let bodies = Mutex<[[UInt8]]>([]) }
            let inbox: Inbox
            let server: WebServer

            private init(server: WebServer, inbox: Inbox) {
                self.server = server
                self.inbox = inbox
            }

            /// Runs `body` with a receiver listening, and stops it whichever way `body` ends.
            static func serving(_ body: (Receiver) async throws -> Void) async throws {
                let inbox = Inbox()
                let router = Router()
                router.post("/capfleet") { request, _ -> Response in
                    let body = Array(buffer: try await request.body.collect(upTo: 1 << 20))
                    guard (try? JSONSerialization.jsonObject(with: Data(body))) is [String: Any] else {
                        return Response(status: .badRequest, body: .init(byteBuffer: ByteBuffer(string: "expected a JSON alert\n")))
                    }
                    inbox.bodies.withLock { $0.append(body) }
                    return Response(status: .noContent)
                }
                let server = try await WebServer.start(host: "127.0.0.1", port: 0, router: router, logger: Logger(label: "webhook"))
                let receiver = Receiver(server: server, inbox: inbox)
                do {
                    try await body(receiver)
                } catch {
                    try await receiver.server.stop()
                    throw error
                }
                try await receiver.server.stop()
            }

            var received: [[String: Any]] {
                inbox.bodies.withLock { $0 }.compactMap { try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any] }
            }
            func named(_ alert: String) -> [[String: Any]] { received.filter { $0["alert"] as? String == alert } }
        }

        /// `capfleet events --json` prints one JSON array.
        static func events(_ fleet: FleetHarness) throws -> [[String: Any]] {
            try fleet.json(["events", "--limit", "200"])
        }

        @Test func alerts_arePublishedHandedToCommandAndWebhook_andRateLimited() async throws {
            let fleet = try FleetHarness()
            try await Receiver.serving { receiver in
                let commandLog = fleet.directory + "/alerts-from-command.jsonl"
                try fleet.startCoordinator(environment: [
                    "CAPFLEET_ALERT_WEBHOOK": "http://127.0.0.1:\(receiver.server.port)/capfleet",
                    "CAPFLEET_ALERT_COMMAND": "cat >> '\(commandLog)'; echo \"$CAPFLEET_ALERT $CAPFLEET_ALERT_NODE\" >> '\(commandLog).env'",
                    "CAPFLEET_ALERT_INTERVAL_S": "6",
                    "CAPFLEET_ALERT_PRESSURE_LEVEL": "serious",
                ])
                let host = try HostFixture(in: fleet.directory)
                func psi(_ resource: String, _ percent: Double) throws { try host.psi(resource, percent) }
                try psi("cpu", 0)
                try psi("memory", 0)
                let agent = try fleet.startAgent("paged", extra: host.agentArguments())
                try await fleet.waitUntil("the agent streams", seconds: 20) {
                    try fleet.deviceStats().values.contains { ($0["frames_captured"] as? Int ?? 0) > 0 }
                }
                let node = try #require(try fleet.json(["nodes"]).first?["node_id"] as? String)
                let device = try #require(try fleet.deviceStats().keys.first)

                // Serious CPU pressure: one alert.
                try psi("cpu", 50)
                try await fleet.waitUntil("a pressure alert reaches the webhook", seconds: 10) { receiver.named("pressure").count == 1 }
                let first = receiver.named("pressure")[0]
                #expect(first["node_id"] as? String == node)
                #expect((first["message"] as? String)?.contains("nominal → serious") == true, "\(first)")
                #expect(first["suppressed"] as? Int == 0)

                // The level falls and rises again within the interval: held back, not sent.
                func levelChanges(_ text: String) throws -> Int {
                    try Self.events(fleet).filter {
                        $0["kind"] as? String == "pressure_level_changed" && ($0["message"] as? String)?.hasPrefix(text) == true
                    }.count
                }
                try psi("cpu", 0)
                try await fleet.waitUntil("the level falls back", seconds: 10) { try levelChanges("serious → nominal") == 1 }
                try psi("cpu", 50)
                try await fleet.waitUntil("the level rises again", seconds: 10) { try levelChanges("nominal → serious") == 2 }

                // Memory pressure at shutdown: a higher level alerts at once, and the camera stops.
                try psi("memory", 70)
                try await fleet.waitUntil("shutdown and interruption alerts arrive", seconds: 10) {
                    receiver.named("pressure").count == 2 && receiver.named("device_interrupted").count == 1
                }
                #expect((receiver.named("pressure")[1]["message"] as? String)?.contains("→ shutdown") == true)
                #expect(receiver.named("device_interrupted")[0]["device_id"] as? String == device)

                // After the interval, the next serious rise is sent and says one was held back.
                try psi("memory", 0)
                try psi("cpu", 0)
                try await Task.sleep(for: .seconds(6))
                try psi("cpu", 50)
                try await fleet.waitUntil("the next pressure alert arrives", seconds: 15) { receiver.named("pressure").count == 3 }
                let third = receiver.named("pressure")[2]
                #expect(third["suppressed"] as? Int == 1, "\(third)")
                #expect((third["message"] as? String)?.contains("1 similar alert(s) held back") == true)

                // A node that vanishes.
                agent.kill()
                try await fleet.waitUntil("the node-offline alert arrives", seconds: 15) { receiver.named("node_offline").count == 1 }

                // The command saw the same alerts, as JSON on stdin and in its environment.
                try await fleet.waitUntil("the command ran for each alert", seconds: 5) {
                    let lines = try String(contentsOfFile: commandLog, encoding: .utf8).split(separator: "\n")
                    return lines.count == receiver.received.count
                }
                let fromCommand = try String(contentsOfFile: commandLog, encoding: .utf8).split(separator: "\n")
                    .compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
                #expect(fromCommand.map { $0["alert"] as? String } == receiver.received.map { $0["alert"] as? String })
                let environment = try String(contentsOfFile: commandLog + ".env", encoding: .utf8)
                #expect(environment.contains("node_offline \(node)"))

                // Each alert is an event too, and /metrics counts what was held back.
                let events = try Self.events(fleet)
                let alertEvents = events.filter { $0["kind"] as? String == "alert" }
                #expect(alertEvents.count == receiver.received.count, "\(alertEvents)")
                #expect(alertEvents.contains { $0["alert"] as? String == "node_offline" })
                let scrape = try MetricsTests.scrape(fleet)
                #expect(scrape.value("capfleet_alerts_total", ["alert": "pressure", "outcome": "throttled"]) == 1)
                #expect(scrape.value("capfleet_alerts_total", ["alert": "pressure", "outcome": "delivered"]) == 3)
            }
        }

        @Test func dropsAboveTheShare_raiseOneAlert() async throws {
            let fleet = try FleetHarness()
            try await Receiver.serving { receiver in
                let coordinator = try fleet.startCoordinator(environment: [
                    "CAPFLEET_ALERT_WEBHOOK": "http://127.0.0.1:\(receiver.server.port)/capfleet",
                    "CAPFLEET_ALERT_DROP_SHARE": "0.05",
                ])
                // The host as the agent's pressure sees it is quiet (a fixture, not this busy
                // machine, whose CPU pressure would raise the level first): only the spell can.
                let host = try HostFixture(in: fleet.directory)
                for resource in ["cpu", "memory", "io"] { try host.psi(resource, 0) }
                try fleet.startAgent("lossy", fps: 30, extra: host.agentArguments(intervalMilliseconds: 1000))
                try await fleet.waitUntil("the agent streams", seconds: 20) {
                    try fleet.deviceStats().values.contains { ($0["frames_captured"] as? Int ?? 0) > 0 }
                }
                let device = try #require(try fleet.deviceStats().keys.first)
                // Someone watches, so the frames are on their way to the coordinator.
                let viewerContext = ZMQContext()
                let viewer = try fleet.wantFrames(of: [device], context: viewerContext)
                defer { viewer.close() }
                try await fleet.waitUntil("the camera's frames flow", seconds: 10) { try fleet.deviceStats()[device]?["live_flow"] as? Bool == true }
                // A coordinator that stops reading: the agent loses frames while its queue is full.
                kill(coordinator.process.processIdentifier, SIGSTOP)
                try await Task.sleep(for: .seconds(3))
                kill(coordinator.process.processIdentifier, SIGCONT)
                try await fleet.waitUntil("a drops alert arrives", seconds: 15) { !receiver.named("drops").isEmpty }
                let alert = receiver.named("drops")[0]
                #expect(alert["device_id"] as? String == device)
                #expect((alert["message"] as? String)?.contains("of its frames over the last 10 s") == true, "\(alert)")
                // One bad spell, one alert.
                try await Task.sleep(for: .seconds(3))
                #expect(receiver.named("drops").count == 1)
                // The agent's own pressure saw the spell: its level rose for the full send queue or
                // the drop rate, whichever its sample caught first (a level change names the factors
                // of the sample that crossed), and where frames were lost it says which reasons.
                let changes = try Self.events(fleet).filter { $0["kind"] as? String == "pressure_level_changed" }.compactMap {
                    $0["message"] as? String
                }
                let rises = changes.filter { !$0.contains("→ nominal") }
                #expect(rises.contains { $0.contains("send_queue") || $0.contains("drop_rate") }, "\(changes)")
                #expect(changes.filter { $0.contains("drop_rate") }.allSatisfy { $0.contains("frames in the last interval:") }, "\(changes)")
            }
        }

        @Test func aWebhookOutsideTheLocalNetworkIsRefusedAtStart() async throws {
            let fleet = try FleetHarness()
            let coordinator = try fleet.startCoordinator(environment: ["CAPFLEET_ALERT_WEBHOOK": "https://hooks.example.com/x"])
            try await fleet.waitUntil("the coordinator refuses to start", seconds: 10) { !coordinator.isRunning }
            #expect(coordinator.process.terminationStatus != 0)
            #expect(coordinator.log.contains("only http:// URLs on the local network"), "\(coordinator.log)")
            // A public address is refused before any alert could go there (nothing is sent).
            let second = try fleet.startCoordinator(environment: ["CAPFLEET_ALERT_WEBHOOK": "http://8.8.8.8:9/hook"])
            try await fleet.waitUntil("the coordinator refuses a public webhook", seconds: 10) { !second.isRunning }
            #expect(second.log.contains("outside this machine and its local network"), "\(second.log)")
        }
    }
}
