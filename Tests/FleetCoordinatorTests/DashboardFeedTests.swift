import FleetBus
import FleetProtocol
import Foundation
import Testing

@testable import FleetCoordinator

/// The dashboard's live feed: what changed is sent, once encoded, and a browser that joins
/// or falls behind gets the whole fleet.
@Suite struct DashboardFeedTests {
    @Test func theLedger_saysWhatChangedAndWhatWentSinceTheLastUpdate() {
        var ledger = DashboardFeedLedger()
        let first = ledger.update(to: [.devices: ["b": "{B}", "a": "{A}"], .nodes: ["n": "{N}"]])
        #expect(first.changed == [.devices: ["{A}", "{B}"], .nodes: ["{N}"]], "everything is new at first, in id order")
        #expect(first.gone.isEmpty)

        let same = ledger.update(to: [.devices: ["b": "{B}", "a": "{A}"], .nodes: ["n": "{N}"]])
        #expect(same.isEmpty, "an unchanged fleet costs nothing")

        let next = ledger.update(to: [.devices: ["a": "{A2}", "c": "{C}"], .nodes: ["n": "{N}"]])
        #expect(next.changed == [.devices: ["{A2}", "{C}"]])
        #expect(next.gone == [.devices: ["b"]])
        #expect(ledger.whole.changed == [.devices: ["{A2}", "{C}"], .nodes: ["{N}"]])
        #expect(ledger.whole.gone.isEmpty)
    }

    @Test func aMessage_isOneJSONObjectWithTheTablesTheGoneIdsAndTheEvents() throws {
        let change = DashboardFeedLedger.Change(changed: [.deviceStats: [#"{"deviceId":"d1"}"#]], gone: [.devices: ["d\"2"]])
        let event = Capfleet_V1_FleetEvent.with {
            $0.kind = .nodeOnline; $0.message = "n1 is online"
        }
        let text = try DashboardLiveFeed.message(change, whole: false, events: [event])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(object["type"] as? String == "fleet" && object["whole"] as? Bool == false)
        #expect(((object["changed"] as? [String: Any])?["device_stats"] as? [[String: Any]])?.first?["deviceId"] as? String == "d1")
        #expect((object["gone"] as? [String: Any])?["devices"] as? [String] == ["d\"2"], "ids are quoted as JSON strings")
        #expect(((object["events"] as? [[String: Any]])?.first?["message"] as? String) == "n1 is online")
    }

    @Test func everyListener_getsTheWholeFleetFirst_thenOnlyChanges_andAStoppedFeedEndsThem() async throws {
        let fleet = FleetSource()
        let telemetry = try TelemetryPublisherSocket(
            context: ZMQContext(), bind: "tcp://127.0.0.1:*",
            security: CurveServerSecurity(keys: try CurveKeyPair.generate(), domain: "telemetry") { _, _ in })
        defer { telemetry.stop() }
        let events = FleetEvents(telemetry: telemetry)
        let feed = DashboardLiveFeed(read: { fleet.reply() }, events: events, logger: .init(label: "test"))
        fleet.set(devices: ["d1": 1, "d2": 1])
        let (_, first) = await feed.join()
        var reading = first.makeAsyncIterator()
        let whole = try #require(await reading.next())
        #expect(whole.contains(#""whole":true"#) && whole.contains("d1") && whole.contains("d2"))

        fleet.set(devices: ["d1": 2, "d2": 1])
        events.emit(.nodeOnline, nodeID: "n1", message: "n1 is online")
        await feed.tick()
        let update = try #require(await reading.next())
        #expect(update.contains(#""whole":false"#) && update.contains("d1") && !update.contains(#""deviceId":"d2""#), "\(update)")
        #expect(update.contains("n1 is online"))

        // A second browser joins: it gets the whole fleet, the first only what changes.
        let (_, second) = await feed.join()
        var secondReading = second.makeAsyncIterator()
        let secondWhole = try #require(await secondReading.next())
        #expect(secondWhole.contains(#""whole":true"#) && secondWhole.contains(#""deviceId":"d2""#))

        await feed.close()
        #expect(await reading.next() == nil)
        #expect(await secondReading.next() == nil)
        #expect(await feed.listenerCount == 0)
    }

    /// A fleet whose devices carry a frame rate that the test changes.
    final class FleetSource: @unchecked Sendable {
        private let lock = NSLock()
        private var devices: [String: Double] = [:]

        func set(devices: [String: Double]) { lock.withLock { self.devices = devices } }

        func reply() -> Capfleet_V1_OperatorReply {
            lock.withLock {
                .with { reply in
                    reply.devices = devices.keys.sorted().map { id in
                        .with {
                            $0.deviceID = id; $0.activeFrameRate = devices[id] ?? 0
                        }
                    }
                }
            }
        }
    }
}
