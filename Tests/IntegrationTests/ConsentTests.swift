import Foundation
import GRDB
import Testing

extension SecondLaneIntegrationTests {
    /// Consent, enforced on the agent and checked in the pixels the coordinator receives.
    @Suite struct ConsentTests {
        /// The device's next frame as the coordinator received it: its header fields and the
        /// luma of its YUYV payload.
        static func frame(_ device: String, _ fleet: FleetHarness) throws -> (info: [String: Any], luma: [UInt8]) {
            let path = fleet.directory + "/frame-\(UUID().uuidString.prefix(6)).raw"
            let info = try fleet.jsonObject(["snapshot", device, "-o", path])
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            try? FileManager.default.removeItem(atPath: path)
            return (info, stride(from: 0, to: bytes.count, by: 2).map { bytes[$0] })
        }

        /// Black in limited-range YUYV: every luma sample at 16, every chroma sample at 128.
        static func isBlack(_ luma: [UInt8]) -> Bool { !luma.isEmpty && luma.allSatisfy { $0 == 16 } }

        @Test func consent_blackUntilGranted_realWithinAFrame_blackFromTheNextFrameAfterRevoke_andAuditedInOrder() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let light = fleet.directory + "/light.log"
            try fleet.startAgent("studio", fps: 15, extra: ["--on-real-frames", "echo \"$CAPFLEET_DEVICE $CAPFLEET_REAL_FRAMES\" >> \(light)"])
            try await fleet.waitUntil("the camera streams", seconds: 20) {
                try fleet.deviceStats().values.contains { ($0["frames_captured"] as? Int ?? 0) > 2 }
            }
            let device = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)

            // Not determined: black frames of the right size and format, flagged, counted as frames.
            var frame = try Self.frame(device, fleet)
            #expect(Self.isBlack(frame.luma), "a device nobody decided about sends black pixels")
            #expect(frame.luma.count == 640 * 480 && frame.info["pixel_format"] as? String == "YUYV")
            #expect(frame.info["consent"] as? String == "not_determined" && frame.info["black"] as? Bool == true, "\(frame.info)")
            let listed = try #require(try fleet.json(["devices"]).first)
            #expect(listed["consent"] as? String == "not_determined" && listed["real_frames"] as? Bool == false, "\(listed)")

            // Deny first, then grant: real pixels (the test pattern is not flat) within one frame interval.
            #expect(try fleet.cli(["consent", "deny", device, "--reason", "rehearsal, people on set"]).status == 0)
            #expect(Self.isBlack(try Self.frame(device, fleet).luma))
            let granted = try fleet.cli(["consent", "grant", device, "--reason", "talent signed release #42", "--json"])
            let grantedAt = Date()
            #expect(granted.status == 0 && granted.output.contains("\"applied_by_agent\" : true"), "\(granted)")
            frame = try Self.frame(device, fleet)
            // The snapshot is the next frame to arrive after the request: at 15 fps that is
            // within one frame interval of the agent applying the grant.
            #expect(!Self.isBlack(frame.luma) && Set(frame.luma).count > 8, "real frames after the grant")
            #expect(frame.info["consent"] as? String == "authorized" && frame.info["black"] as? Bool == false)
            #expect(Date().timeIntervalSince(grantedAt) < 2)
            try await fleet.waitUntil("devices shows real frames", seconds: 5) {
                try fleet.json(["devices"]).first?["real_frames"] as? Bool == true
            }

            // Revoke mid-stream: the very next frame is black.
            #expect(try fleet.cli(["consent", "revoke", device, "--reason", "talent withdrew"]).status == 0)
            #expect(Self.isBlack(try Self.frame(device, fleet).luma), "the next frame after a revoke is black")
            // Revoking again is refused: nothing to revoke.
            let again = try fleet.cli(["consent", "revoke", device, "--reason", "twice"])
            #expect(again.status != 0 && again.error.contains("no consent to revoke"), "\(again.error)")

            // A viewer cannot change consent; an operator cannot restrict; an admin can, and only an admin lifts it.
            #expect(try fleet.cli(["consent", "grant", device, "--reason", "x"], user: "vi").status != 0)
            let restrictByOperator = try fleet.cli(["consent", "restrict", device, "--reason", "site policy"], user: "bo")
            #expect(restrictByOperator.status != 0 && restrictByOperator.error.contains("admin"), "\(restrictByOperator.error)")
            #expect(try fleet.cli(["consent", "restrict", device, "--reason", "site policy: no cameras in the changing room"]).status == 0)
            let liftByOperator = try fleet.cli(["consent", "grant", device, "--reason", "please"], user: "bo")
            #expect(liftByOperator.status != 0 && liftByOperator.error.contains("admin"), "\(liftByOperator.error)")
            #expect(Self.isBlack(try Self.frame(device, fleet).luma))

            // The history lists every change in order, with who and why.
            let history = try fleet.json(["consent", "history", device])
            let rows = history.map {
                "\($0["actor"] as? String ?? "") \($0["action"] as? String ?? "") \($0["from"] as? String ?? "")→\($0["to"] as? String ?? "") \($0["reason"] as? String ?? "")"
            }
            #expect(
                rows == [
                    "ana deny not_determined→denied rehearsal, people on set",
                    "ana grant denied→authorized talent signed release #42",
                    "ana revoke authorized→denied talent withdrew",
                    "ana restrict denied→restricted site policy: no cameras in the changing room",
                ], "\(rows)")
            let times = history.compactMap { $0["unix_ms"] as? Int }
            #expect(times == times.sorted())
            // The history is append-only, like the audit log.
            let tampered = Result { try DatabaseQueue(path: fleet.databasePath).write { try $0.execute(sql: "DELETE FROM consentHistory") } }
            #expect((try? tampered.get()) == nil, "the consent history refuses deletion")

            // The recording light went on with the first real frame and off at the revoke.
            try await fleet.waitUntil("the recording light ran", seconds: 5) {
                (try? String(contentsOfFile: light, encoding: .utf8))?.contains("\(device) off") == true
            }
            let lightLog = try String(contentsOfFile: light, encoding: .utf8).split(separator: "\n")
            #expect(lightLog == ["\(device) on", "\(device) off"], "\(lightLog)")
        }

        @Test func deniedDevice_staysDenied_whenTheCoordinatorIsGoneAndTheAgentRestarts() async throws {
            let fleet = try FleetHarness()
            let coordinator = try fleet.startCoordinator()
            let agent = try fleet.startAgent("kept", fps: 15)
            try await fleet.waitUntil("the camera streams", seconds: 20) {
                try fleet.deviceStats().values.contains { ($0["frames_captured"] as? Int ?? 0) > 2 }
            }
            let device = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            try fleet.grantConsent(device)
            #expect(!Self.isBlack(try Self.frame(device, fleet).luma))
            #expect(try fleet.cli(["consent", "deny", device, "--reason", "closed set"]).status == 0)
            #expect(Self.isBlack(try Self.frame(device, fleet).luma))

            // Kill the coordinator, then restart the agent while it is gone: the agent reads
            // its own record and stays denied; nothing unlocks it.
            coordinator.kill()
            agent.kill()
            let stored = try String(contentsOfFile: fleet.directory + "/kept/consent.json", encoding: .utf8)
            #expect(stored.contains("\"denied\""), "\(stored)")
            try fleet.startAgent("kept", fps: 15)
            try await Task.sleep(for: .seconds(2))
            // A coordinator whose database lost the decision would say not determined: still black.
            try fleet.startCoordinator()
            try await fleet.waitUntil("the camera streams again", seconds: 20) {
                try fleet.deviceStats()[device]?["streaming"] as? Bool == true
            }
            for _ in 0..<3 {
                let frame = try Self.frame(device, fleet)
                #expect(Self.isBlack(frame.luma) && frame.info["consent"] as? String == "denied", "\(frame.info)")
            }
        }
    }
}
