import FleetBus
import FleetCore
import FleetDetection
import FleetImaging
import FleetProtocol
import Foundation
import GRDB
import Testing

extension IntegrationTests {
    /// Moments by rule (proto-docs/recordings.md, "Moments by rule"): a QR code shown to a real
    /// agent's synthetic camera (its Show Overlays control) takes one moment and exactly one,
    /// whose still is the frame that showed it (from the camera's pre-roll) and whose take runs
    /// around that frame's instant; shown again after the re-arm time, another; exported together.
    @Suite struct MomentRuleTests {
        @Test func aCodeShownToACamera_takesOneMomentAndOnlyOne_itsStillAtTheFrameThatShowedIt() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("line", synthetic: 1, fps: 10, extra: ["--synthetic-overlay", "qr:part-17@0.6,0.1,0.3"])
            try await fleet.waitUntil("the clock locks", seconds: 30) { agent.log.contains("clock.state=locked") }
            let camera = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            try fleet.grantConsent(camera)
            #expect(try fleet.cli(["lock", camera]).status == 0)
            // The part is not in view yet.
            let hidden = try fleet.cli(["control", camera, "show_overlays", "off"])
            #expect(hidden.status == 0, "\(hidden.error)")
            _ = try fleet.jsonObject(["detect", camera, "--codes", "qr", "--fps", "5"])
            #expect(try fleet.cli(["preroll", camera, "4s"]).status == 0)

            let refused = try fleet.cli(["moment-rule", "add", "line-a", "--on", camera, "--text", "go"])
            #expect(refused.status != 0 && refused.error.contains("is a camera"), "a camera's rule waits for detections: \(refused.error)")
            let added = try fleet.jsonObject([
                "moment-rule", "add", "line-a", "--on", camera, "--code", "--value", "part-17", "--before", "1s", "--after", "1s", "--rearm", "2s",
            ])
            #expect(added["on"] as? String == "code" && added["value"] as? String == "part-17" && added["fired"] as? Int == 0, "\(added)")
            try await Task.sleep(for: .seconds(5))
            #expect(try fleet.json(["moments"]).isEmpty, "nothing in view, nothing taken")

            // The part passes the camera: in view for 3 s (about fifteen examined frames).
            #expect(try fleet.cli(["control", camera, "show_overlays", "on"]).status == 0)
            try await Task.sleep(for: .seconds(3))
            #expect(try fleet.cli(["control", camera, "show_overlays", "off"]).status == 0)
            try await fleet.waitUntil("the rule's moment is stored", seconds: 30) {
                try fleet.json(["moment-rule"]).first?["fired"] as? Int == 1 && !(try fleet.json(["moment-rule"]).first?["taking"] as? Bool ?? true)
            }
            try await Task.sleep(for: .seconds(2))
            let moments = try fleet.json(["moments"])
            try #require(moments.count == 1, "one part in view for 3 s, one moment: \(moments)")
            let moment = moments[0]
            #expect(moment["trigger"] as? String == "rule line-a" && moment["cause"] as? String == "qr \"part-17\" on \(camera)", "\(moment)")
            let instant = try #require(moment["instant_fleet_ns"] as? Int)
            let take = try fleet.jsonObject(["recordings", "show", try #require(moment["take_id"] as? String)])
            #expect(take["state"] as? String == "stopped", "\(take)")
            #expect(take["start_fleet_ns"] as? Int == instant - 1_000_000_000 && take["stop_fleet_ns"] as? Int == instant + 1_000_000_000, "\(take)")
            for part in take["devices"] as? [[String: Any]] ?? [] {
                let frames = part["frames"] as? Int ?? 0
                #expect(abs(frames - 20) <= 2, "2 s at 10 fps around the instant, the first second from the pre-roll: \(part)")
                // Within one interval of the start (10 fps), and the sensor's jitter: a frame a few
                // microseconds before the start is not the take's.
                #expect(abs((part["first_fleet_ns"] as? Int ?? 0) - (instant - 1_000_000_000)) <= 102_000_000, "\(part)")
            }
            let still = try fleet.jsonObject(["stills", "show", try #require(moment["still_id"] as? String)])
            let pictures = (still["cameras"] as? [[String: Any]] ?? []).flatMap { $0["pictures"] as? [[String: Any]] ?? [] }
            try #require(pictures.count == 1, "\(still)")
            // The frame the detection examined: the instant is its capture time.
            #expect(pictures[0]["fleet_time_ns"] as? Int == instant, "the still is the frame that showed the code: \(pictures[0])")
            print("moment rule: moment \(moment["id"] ?? "?") at \(instant), take \(take["id"] ?? "?"), still \(still["id"] ?? "?")")

            // Exported together: the take's file, the picture, and the moment's index; the picture shows the code.
            let directory = fleet.directory + "/moment-export"
            let exported = try fleet.cli(
                ["moments", "export", try #require(moment["id"] as? String), "--to", directory, "--json"], timeout: 60)
            #expect(exported.status == 0, "\(exported.error)")
            let files = try FileManager.default.subpathsOfDirectory(atPath: directory)
            #expect(files.contains("moment.json") && files.contains { $0.hasPrefix("take/\(camera)/") && $0.hasSuffix(".mkv") }, "\(files)")
            let png = try #require(files.first { $0.hasPrefix("still/") && $0.hasSuffix(".png") }, "\(files)")
            let picture = try PNGDecoder.decode([UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/" + png))))
            let grey = GreyImage(
                width: picture.width, height: picture.height,
                pixels: (0..<(picture.width * picture.height)).map { picture.pixels[$0 * 3 + 1] })
            let codes = try BarcodeScanner(symbologies: [.qr]).scan(grey)
            #expect(codes.map(\.value) == ["part-17"], "the moment's picture shows the part: \(codes)")
            let index = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: directory + "/moment.json"))) as? [String: Any])
            #expect(index["id"] as? String == moment["id"] as? String && (index["take"] as? [String: Any])?["id"] as? String == take["id"] as? String)

            // The next part, after the re-arm time: a second moment.
            #expect(try fleet.cli(["control", camera, "show_overlays", "on"]).status == 0)
            try await fleet.waitUntil("the second part's moment is stored", seconds: 30) {
                try fleet.json(["moment-rule"]).first?["fired"] as? Int == 2 && !(try fleet.json(["moment-rule"]).first?["taking"] as? Bool ?? true)
            }
            try await Task.sleep(for: .seconds(3))
            let rule = try #require(try fleet.json(["moment-rule"]).first)
            #expect(rule["fired"] as? Int == 2 && rule["missed"] as? Int == 0 && rule["refused"] as? Int == 0, "still in view, no third: \(rule)")
            #expect(try fleet.json(["moments"]).count == 2)

            let audit = try await DatabaseQueue(path: fleet.databasePath).read { db in
                try Row.fetchAll(db, sql: "SELECT actor, action FROM auditLog WHERE action IN ('moment.rule', 'moment.take') ORDER BY id")
                    .map { "\($0["actor"] as String) \($0["action"] as String)" }
            }
            #expect(audit == ["ana moment.rule", "rule line-a moment.take", "rule line-a moment.take"], "\(audit)")
            #expect(try fleet.cli(["moment-rule", "remove", "line-a"]).status == 0)
            #expect(try fleet.json(["moment-rule"]).isEmpty)
        }

        /// A GPIO line's rising edge from another process on the camera's host (a sensor stream)
        /// takes a moment of the camera at the edge's instant; the next edge, another.
        @Test func aLineGoingHigh_onASensorStream_takesAMomentOfTheCameraAtTheEdge() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("press", synthetic: 1, fps: 10, extra: ["--sensor-stream", "lines"])
            try await fleet.waitUntil("the clock locks", seconds: 30) { agent.log.contains("clock.state=locked") }
            let devices = try fleet.json(["devices"])
            let camera = try #require(devices.first { $0["kind"] as? String == "synthetic" }?["device_id"] as? String)
            let lines = try #require(devices.first { $0["kind"] as? String == "sensor" }?["device_id"] as? String)
            try fleet.grantConsent(camera)
            try fleet.grantConsent(lines)
            #expect(try fleet.cli(["lock", camera]).status == 0)
            #expect(try fleet.cli(["preroll", camera, "3s"]).status == 0)
            let unnamed = try fleet.cli(["moment-rule", "add", "press", "--on", lines, "--channel", "line0", "--above", "0.5"])
            #expect(unnamed.status != 0 && unnamed.error.contains("name the cameras"), "\(unnamed.error)")
            #expect(
                try fleet.cli([
                    "moment-rule", "add", "press", "--on", lines, "--channel", "line0", "--above", "0.5", camera, "--before", "1s", "--after", "1s",
                    "--rearm", "100ms",
                ]).status == 0)
            try await Task.sleep(for: .seconds(3))

            let context = ZMQContext()
            let push = try ZMQSocket(context: context, type: .push)
            defer { push.close() }
            try push.connect("ipc://" + fleet.directory + "/press/sensors.sock")
            // A 20 ms pulse sampled every millisecond, with a 2 ms glitch 40 ms later (within the re-arm time).
            func pulse() throws -> UInt64 {
                var now = timespec()
                clock_gettime(CLOCK_MONOTONIC, &now)
                let start = UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
                _ = try push.send(
                    try Capfleet_V1_SensorSamples.with {
                        $0.stream = "lines"
                        $0.channels = ["line0"]
                        $0.samples = (0..<80).map { ms in
                            .with {
                                $0.monotonicNs = start + UInt64(ms) * 1_000_000
                                $0.values = [ms < 20 || (60..<62).contains(ms) ? 1 : 0]
                            }
                        }
                    }.serializedBytes())
                return start
            }
            let offset = IntegrationTests.ClockSyncTests.wallMinusMonotonic()
            var edges: [Double] = []
            for number in 1...2 {
                edges.append(Double(try pulse()) + offset)
                try await fleet.waitUntil("the edge's moment is stored", seconds: 30) {
                    let rule = try fleet.json(["moment-rule"]).first
                    return rule?["fired"] as? Int == number && rule?["taking"] as? Bool == false
                }
            }
            let moments = try fleet.json(["moments"]).sorted { ($0["instant_fleet_ns"] as? Int ?? 0) < ($1["instant_fleet_ns"] as? Int ?? 0) }
            try #require(moments.count == 2, "two edges, two moments (the glitch within the re-arm time is none): \(moments)")
            for (moment, edge) in zip(moments, edges) {
                let instant = Double(try #require(moment["instant_fleet_ns"] as? Int))
                #expect(abs(instant - edge) < 2_000_000, "the moment is at the edge's instant: off by \(instant - edge) ns")
                #expect(moment["cause"] as? String == "line0 above 0.5 on \(lines)" && moment["devices"] as? [String] == [camera], "\(moment)")
                let still = try fleet.jsonObject(["stills", "show", try #require(moment["still_id"] as? String)])
                let picture = try #require((still["cameras"] as? [[String: Any]])?.first?["pictures"] as? [[String: Any]]).first
                let at = Double(picture?["fleet_time_ns"] as? Int ?? 0)
                #expect(abs(at - instant) <= 50_000_000, "the camera's frame nearest the edge, from its pre-roll: \(picture ?? [:])")
            }
            let rule = try #require(try fleet.json(["moment-rule"]).first)
            #expect(rule["missed"] as? Int == 0 && rule["refused"] as? Int == 0, "\(rule)")
        }
    }
}
