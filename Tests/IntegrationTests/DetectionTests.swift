import Foundation
import GRDB
import Testing

extension SecondLaneIntegrationTests {
    /// Codes and faces found by a real agent in its synthetic cameras' frames (proto-docs/
    /// detection.md): a QR code drawn with libqrencode and Eileen Collins's NASA portrait
    /// (astronaut.png from Debian's python3-skimage, in .build-test-assets/), followed on
    /// telemetry with `capfleet metadata`, and written into a take's timed-metadata track.
    @Suite struct DetectionTests {
        static var portrait: String {
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent(".build-test-assets/astronaut.png").path
        }

        static func reports(_ fleet: FleetHarness, _ device: String, count: Int) throws -> [[String: Any]] {
            let followed = try fleet.cli(["metadata", device, "--count", "\(count)", "--wait", "15", "--json"], timeout: 30)
            guard followed.status == 0 else { throw HarnessError("capfleet metadata \(device) failed: \(followed.error)") }
            return try followed.output.split(separator: "\n").map {
                guard let object = try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] else {
                    throw HarnessError("not JSON: \($0)")
                }
                return object
            }
        }

        static func objects(_ report: [String: Any], kind: String) -> [[String: Any]] {
            (report["objects"] as? [[String: Any]] ?? []).filter { $0["kind"] as? String == kind }
        }

        @Test func aDrawnQRCodeAndFace_areReportedWhereTheyAre_idsPersist_theRegionExcludes_andConsentWithholds() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent(
                "scan", synthetic: 2, fps: 15,
                extra: [
                    "--synthetic-overlay", "qr:capfleet-42@0.6,0.1,0.3", "--synthetic-overlay", "image:\(Self.portrait)@0.05,0.3,0.45",
                ])
            try await fleet.waitUntil("the clock locks", seconds: 30) { agent.log.contains("clock.state=locked") }
            let devices = try fleet.json(["devices"]).compactMap { $0["device_id"] as? String }.sorted()
            try #require(devices.count == 2)
            let (seen, unseen) = (devices[0], devices[1])
            try fleet.grantConsent(seen)

            let refused = try fleet.cli(["detect", seen, "--codes", "qr"])
            #expect(refused.status != 0 && refused.error.contains("capfleet lock"), "detection settings need the lease: \(refused.error)")
            for device in devices { #expect(try fleet.cli(["lock", device]).status == 0) }
            let unsupported = try fleet.cli(["detect", seen, "--codes", "qr,datamatrix"])
            #expect(unsupported.status != 0 && unsupported.error.contains("ZBar"), "\(unsupported.error)")
            let set = try fleet.jsonObject(["detect", seen, "--codes", "qr,ean13", "--faces", "--fps", "5"])
            #expect(set["codes"] as? [String] == ["qr", "ean13"] && set["faces"] as? Bool == true)

            let reports = try Self.reports(fleet, seen, count: 4)
            var faceIDs: Set<Int> = []
            for report in reports {
                let codes = Self.objects(report, kind: "code")
                try #require(codes.count == 1, "the QR code in every examined frame: \(report)")
                #expect(codes[0]["symbology"] as? String == "qr" && codes[0]["value"] as? String == "capfleet-42")
                let bounds = try #require(codes[0]["bounds"] as? [Double])
                // Drawn from x 0.6, 0.3 wide, quiet zone included: the symbol lies inside that.
                #expect(bounds[0] > 0.6 && bounds[0] + bounds[2] < 0.9 && bounds[1] > 0.1, "\(bounds)")
                let faces = Self.objects(report, kind: "face")
                try #require(faces.count == 1, "the portrait's face: \(report)")
                let box = try #require(faces[0]["bounds"] as? [Double])
                #expect(box[0] > 0.05 && box[0] + box[2] < 0.5 && box[1] > 0.3, "the face inside the portrait: \(box)")
                faceIDs.insert(try #require(faces[0]["face_id"] as? Int))
                #expect(report["fleet_time_ns"] as? Int != nil)
            }
            #expect(faceIDs.count == 1, "one face, one id from frame to frame: \(faceIDs)")

            // The left half only: the code (on the right) is no longer reported, the face is.
            _ = try fleet.jsonObject(["detect", seen, "--codes", "qr", "--faces", "--region", "0,0,0.5,1"])
            try await Task.sleep(for: .seconds(1))
            for report in try Self.reports(fleet, seen, count: 3) {
                #expect(Self.objects(report, kind: "code").isEmpty && Self.objects(report, kind: "face").count == 1, "\(report)")
            }

            // No consent: the same settings, and nothing leaves the host.
            _ = try fleet.jsonObject(["detect", unseen, "--codes", "qr", "--faces"])
            let silent = try fleet.cli(["metadata", unseen, "--wait", "4"], timeout: 10)
            #expect(silent.status != 0 && silent.error.contains("no detection report"), "a camera without consent reports nothing: \(silent.output)")

            let audit = try await DatabaseQueue(path: fleet.databasePath).read { db in
                try String.fetchAll(
                    db, sql: "SELECT outcome FROM auditLog WHERE action = 'device.detection' AND target = ? ORDER BY id", arguments: [seen])
            }
            #expect(
                audit == ["refused", "ok", "ok"],
                "the refusal for the lease, then two changes (the unknown symbology never reached the coordinator's lease): \(audit)")

            // A take of the camera holds the detections in its timed-metadata track.
            let take = try SecondLaneIntegrationTests.DetectionTests.record(seen, in: fleet, seconds: 3)
            let entries = try Self.trackEntries(take: take, device: seen, in: fleet)
            let detections = entries.filter { $0.json["kind"] as? String == "detection" }
            #expect(detections.count >= 5, "about five a second for three seconds: \(detections.count)")
            for entry in detections {
                let fleetNs = try #require(entry.json["fleet_ns"] as? Int)
                // Only the take's own frames, each at its frame's time (Matroska's millisecond),
                // though it arrived after later frames were written.
                #expect(fleetNs >= take.start, "a frame before the take's start is not its: \(entry.json)")
                let frameTime = Double(fleetNs - take.start) / 1e6
                #expect(abs(entry.milliseconds - frameTime) <= 1, "\(entry.milliseconds) ms for a frame at \(frameTime) ms")
                #expect((entry.json["objects"] as? [[String: Any]])?.contains { $0["kind"] as? String == "face" } == true)
            }
        }

        /// `capfleet scan-setup`: the zoom for a 20 mm code from the synthetic camera's 78° formats
        /// and its lens's 10 cm near limit, then from what an operator recorded with `capfleet
        /// optics`, applied under the lease; the detection region is the share the code fills.
        @Test func scanSetup_recommendsTheZoomForACodeSize_fromTheFormatAndTheLens_andAppliesItUnderTheLease() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            _ = try fleet.startAgent("lens", synthetic: 1, fps: 5)
            try await fleet.waitUntil("the camera registers", seconds: 30) { try fleet.json(["devices"]).count == 1 }
            let device = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            let halfAngle = tan(39 * Double.pi / 180)

            let first = try fleet.jsonObject(["scan-setup", device, "--code-mm", "20", "--json"])
            let expected = 100 / (80 / (2 * halfAngle))
            #expect(abs((first["zoom_factor"] as? Double ?? 0) - expected) < 1e-6, "\(first)")
            #expect(
                first["field_of_view_from"] as? String == "the active format"
                    && first["minimum_focus_distance_from"] as? String == "the focus range's near limit")
            #expect(abs((first["code_pixels"] as? Double ?? 0) - 160) < 1e-6 && first["readable"] as? Bool == true, "\(first)")
            let text = try fleet.cli(["scan-setup", device, "--code-mm", "20"])
            #expect(text.status == 0 && text.output.contains("zoom 2.02x for a 20 mm code held at 100 mm"), "\(text.output)\(text.error)")

            let recorded = try fleet.jsonObject(["optics", device, "--min-focus-mm", "200", "--json"])
            #expect(recorded["minimum_focus_distance_mm"] as? Double == 200 && recorded["changed_by"] as? String != nil, "\(recorded)")
            let second = try fleet.jsonObject(["scan-setup", device, "--code-mm", "20", "--json"])
            #expect(
                abs((second["zoom_factor"] as? Double ?? 0) - 2 * expected) < 1e-6
                    && second["minimum_focus_distance_from"] as? String == "the device's optics setting", "\(second)")

            let unleased = try fleet.cli(["scan-setup", device, "--code-mm", "20", "--apply"])
            #expect(unleased.status != 0 && unleased.error.contains("capfleet lock"), "setting the zoom needs the lease: \(unleased.error)")
            #expect(try fleet.cli(["lock", device]).status == 0)
            let applied = try fleet.jsonObject(["scan-setup", device, "--code-mm", "20", "--apply", "--json"])
            #expect(abs((applied["applied_zoom_factor"] as? Double ?? 0) - 2 * expected) < 0.01, "\(applied)")
            let shown = try fleet.jsonObject(["device", device, "--json"])
            #expect(abs(((shown["device"] as? [String: Any])?["zoom_factor"] as? Double ?? 0) - 2 * expected) < 0.01, "\(shown)")
            #expect(
                shown["minimum_focus_distance_mm"] as? Double == 100
                    && (shown["optics"] as? [String: Any])?["minimum_focus_distance_mm"] as? Double == 200, "\(shown)")

            #expect(try fleet.cli(["detect", device, "--codes", "qr", "--region", "0.3,0.3,0.4,0.4"]).status == 0)
            let regional = try fleet.jsonObject(["scan-setup", device, "--code-mm", "20", "--json"])
            #expect(regional["fill"] as? Double == 0.4 && regional["fill_from"] as? String == "the detection region's width", "\(regional)")

            let cleared = try fleet.cli(["optics", device, "--clear"])
            #expect(cleared.status == 0 && cleared.output.contains("nothing known"), "\(cleared.output)")
            let bad = try fleet.cli(["optics", device, "--fov", "190"])
            #expect(bad.status != 0 && bad.error.contains("between 0 and 180"), "\(bad.error)")
            let audit = try await DatabaseQueue(path: fleet.databasePath).read { db in
                try String.fetchAll(
                    db, sql: "SELECT detail FROM auditLog WHERE action = 'device.optics' AND target = ? ORDER BY id", arguments: [device])
            }
            #expect(audit == ["focuses from 200 mm", "nothing known"], "\(audit)")
        }

        struct Take {
            let id: String
            let start: Int
        }

        static func record(_ device: String, in fleet: FleetHarness, seconds: Double) throws -> Take {
            let started = try fleet.cli(["record", "start", device, "--store", "coordinator", "--json"], timeout: 15)
            guard started.status == 0, let take = try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any],
                let id = take["id"] as? String, let start = take["start_fleet_ns"] as? Int
            else {
                throw HarnessError("record start failed: \(started.output)\(started.error)")
            }
            Thread.sleep(forTimeInterval: seconds + 1)
            let stopped = try fleet.cli(["record", "stop", id], timeout: 20)
            guard stopped.status == 0 else { throw HarnessError("record stop failed: \(stopped.error)") }
            return Take(id: id, start: start)
        }

        /// The take's timed-metadata entries for the device, with their place in the track (ms).
        static func trackEntries(take: Take, device: String, in fleet: FleetHarness) throws -> [(milliseconds: Double, json: [String: Any])] {
            let shown = try fleet.jsonObject(["recordings", "show", take.id])
            let paths = (shown["segments"] as? [[String: Any]] ?? []).filter { $0["device_id"] as? String == device }.compactMap {
                $0["path"] as? String
            }
            return try SecondLaneIntegrationTests.RecordingTests.metadataTrack(in: paths, track: 1).compactMap { entry in
                (try? JSONSerialization.jsonObject(with: Data(entry.json.utf8)) as? [String: Any]).map { (entry.milliseconds, $0) }
            }
        }
    }
}
