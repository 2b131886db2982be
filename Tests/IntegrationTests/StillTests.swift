import Foundation
import GRDB
import Testing

extension SecondLaneIntegrationTests {
    /// Synchronised stills (proto-docs/stills.md) from a real coordinator and agent with
    /// synthetic cameras, whose still format is larger than their streaming ones and whose
    /// exposure control changes their picture; pictures read back with Python's PIL.
    @Suite struct StillTests {
        /// PIL's view of a picture: size, mode, and its level: the mean brightness (as 8-bit
        /// grey) of 8-bit pictures, the largest sample of 16-bit ones (PIL reads them as mode I).
        static func inspect(_ path: String) throws -> (width: Int, height: Int, mode: String, mean: Double) {
            let script = """
                import sys
                from PIL import Image, ImageStat
                Image.open(sys.argv[1]).verify()
                image = Image.open(sys.argv[1])
                level = image.getextrema()[1] if image.mode.startswith("I") else ImageStat.Stat(image.convert("L")).mean[0]
                print(image.size[0], image.size[1], image.mode, level)
                """
            let fields = String(decoding: try SecondLaneIntegrationTests.PreviewTests.run("/usr/bin/python3", ["-c", script, path]), as: UTF8.self)
                .split(separator: " ").map { String($0).trimmingCharacters(in: .whitespacesAndNewlines) }
            guard fields.count == 4, let width = Int(fields[0]), let height = Int(fields[1]), let mean = Double(fields[3]) else {
                throw HarnessError("PIL did not describe \(path): \(fields)")
            }
            return (width, height, fields[2], mean)
        }

        static func sidecar(_ path: String) throws -> [String: Any] {
            guard let object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any] else {
                throw HarnessError("\(path) is not a JSON object")
            }
            return object
        }

        @Test func still_ofTwoCameras_switchesToTheStillFormatAndBack_bracketsTheExposure_andRefusesTheCameraWithoutConsent() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("rig", synthetic: 3, fps: 15)
            try await fleet.waitUntil("the clock locks", seconds: 30) { agent.log.contains("clock.state=locked") }
            let devices = try fleet.json(["devices"]).compactMap { $0["device_id"] as? String }.sorted()
            try #require(devices.count == 3)
            let (shot, withheld) = (Array(devices[0...1]), devices[2])
            for device in shot { try fleet.grantConsent(device) }
            let before = try fleet.json(["devices"]).filter { shot.contains($0["device_id"] as? String ?? "") }

            let output = fleet.directory + "/stills-out"
            // A larger format than the stream's, in JPEG: six 16-megapixel pictures from a debug
            // build would cost the other test lane a minute of CPU; the largest format (max) and
            // the PNG paths are taken below.
            let taken = try fleet.cli(
                ["still"] + devices + ["--size", "1920x1080", "--bracket", "-1,0,1", "--jpeg", "-o", output, "--contact-sheet", "--json"],
                timeout: 60)
            #expect(taken.status == 3, "a camera without consent makes the exit status 3: \(taken.status) \(taken.error)")
            #expect(taken.error.contains(withheld) && taken.error.contains("consent"), "the refusal is said: \(taken.error)")
            let result = try #require(try JSONSerialization.jsonObject(with: Data(taken.output.utf8)) as? [String: Any], "\(taken.output)")
            let still = try #require(result["still"] as? [String: Any])
            let stillID = try #require(still["id"] as? String)
            #expect(still["state"] as? String == "partial")
            let instant = try #require(still["requested_fleet_ns"] as? Int)
            let cameras = try #require(still["cameras"] as? [[String: Any]])
            let refused = try #require(cameras.first { $0["device_id"] as? String == withheld })
            #expect(refused["state"] as? String == "failed" && (refused["error"] as? String ?? "").contains("consent"), "\(refused)")
            for camera in cameras where shot.contains(camera["device_id"] as? String ?? "") {
                try #require(camera["state"] as? String == "stored", "every camera with consent took its pictures: \(camera)")
            }

            for device in shot {
                var means: [Double] = []
                for number in 1...3 {
                    let picture = output + "/\(device)-\(number).jpg"
                    let seen = try Self.inspect(picture)
                    #expect(seen.width == 1920 && seen.height == 1080 && seen.mode == "RGB", "the size asked for: \(seen)")
                    means.append(seen.mean)
                    let side = try Self.sidecar(output + "/\(device)-\(number).json")
                    #expect(side["device_id"] as? String == device && side["number"] as? Int == number)
                    #expect(
                        side["requested_fleet_ns"] as? Int == instant + (number - 1) * 300_000_000,
                        "picture i at the instant plus i intervals: \(side)")
                    let spread = try #require(side["spread_ns"] as? Int)
                    // At 15 fps the nearest frame is within half an interval (33 ms), with room for a late one.
                    #expect(abs(spread) <= 70_000_000, "nearest frame: spread \(spread) ns")
                    #expect(side["consent"] as? String == "authorized" && side["clock_sync"] as? String == "locked")
                    let format = try #require(side["format"] as? [String: Any])
                    #expect(format["width"] as? Int == 1920 && format["pixel_format"] as? String == "YUYV", "\(format)")
                    let exposure = try #require(side["exposure"] as? [String: Any])
                    let seconds = try #require(exposure["seconds"] as? Double)
                    #expect(
                        exposure["automatic"] as? Bool == false && abs(seconds - 0.01 * pow(2, Double(number - 2))) < 1e-6,
                        "EV \(number - 2): \(exposure)")
                    #expect((side["away_from_streaming_ns"] as? Int ?? 0) > 0, "the camera left its 640x480 stream for the still")
                }
                #expect(means[0] < means[1] && means[1] < means[2], "each stop brighter than the last: \(means)")
            }
            let sheet = try Self.inspect(output + "/contact-sheet.png")
            #expect(sheet.width > 900 && sheet.height > 700, "six tiles and a refused one: \(sheet)")

            // Back on the streaming format at its rate, exposure automatic again.
            try await fleet.waitUntil("the cameras stream 640x480 at 15 fps again", seconds: 10) {
                let after = try fleet.json(["devices"]).filter { shot.contains($0["device_id"] as? String ?? "") }
                return after.count == 2
                    && zip(before, after).allSatisfy { old, new in
                        (new["active_format"] as? NSDictionary) == (old["active_format"] as? NSDictionary)
                            && new["active_frame_rate"] as? Double == 15
                    }
            }
            // The coordinator holds the pictures; the agent's copies are gone; the index says so.
            let shown = try fleet.jsonObject(["stills", "show", stillID])
            #expect(shown["state"] as? String == "partial")
            let agentStills = fleet.directory + "/rig/recordings/stills/" + stillID
            let left = (try? FileManager.default.contentsOfDirectory(atPath: agentStills)) ?? []
            #expect(left.isEmpty, "the agent removes its copies once the coordinator holds them: \(left)")
            let listed = try fleet.json(["stills", "list"])
            #expect(listed.count == 1 && listed.first?["id"] as? String == stillID)
            let audit = try await DatabaseQueue(path: fleet.databasePath).read { db in
                try String.fetchAll(db, sql: "SELECT detail FROM auditLog WHERE action = 'still.take' AND target = ?", arguments: [stillID])
            }
            #expect(audit.count == 1 && audit[0].contains("refused: \(withheld)"), "\(audit)")

            // 16-bit grey where the format has more than 8 bits; JPEG at the streaming size, no switch.
            // The largest format (max) in its grey variant.
            let grey = try fleet.cli(["still", shot[0], "--pixel-format", "Y16", "-o", output + "/grey", "--json"], timeout: 60)
            #expect(grey.status == 0, "\(grey.error)")
            let deep = try Self.inspect(output + "/grey/\(shot[0])-1.png")
            #expect(deep.mode.hasPrefix("I") && deep.width == 4608 && deep.mean > 255, "a 16-bit grey PNG, samples above 8 bits: \(deep)")
            #expect(try Self.sidecar(output + "/grey/\(shot[0])-1.json")["bits_per_sample"] as? Int == 16)
            let small = try fleet.cli(["still", shot[1], "--size", "640x480", "-o", output + "/small", "--json"], timeout: 60)
            #expect(small.status == 0, "\(small.error)")
            let png = try SecondLaneIntegrationTests.PreviewTests.pil(output + "/small/\(shot[1])-1.png")
            #expect(png.width == 640 && png.height == 480, "an 8-bit RGB PNG at the streaming size")
            #expect(try Self.sidecar(output + "/small/\(shot[1])-1.json")["away_from_streaming_ns"] as? Int == 0, "no switch at the streaming size")

            // Deleted: gone from the index and the coordinator's disk.
            let directory = try #require(shown["directory"] as? String)
            #expect(FileManager.default.fileExists(atPath: directory + "/\(shot[0])-1.jpg"))
            #expect(try fleet.cli(["stills", "delete", stillID]).status == 0)
            #expect(!FileManager.default.fileExists(atPath: directory))
            #expect(try fleet.json(["stills", "list"]).count == 2)

            // No camera with consent: refused as a whole, and audited.
            let none = try fleet.cli(["still", withheld], timeout: 30)
            #expect(none.status != 0 && none.error.contains("consent"), "\(none.error)")
        }

        /// The coordinator stops while a camera takes its picture: the answer is lost, yet once
        /// the coordinator is back the agent reports what it wrote on its recordings link, the
        /// index adopts it, and the copy goes on by itself (no export needed to start it).
        @Test func aCoordinatorStoppedWhileTheCameraTookItsPicture_adoptsAndCopiesItWhenBack() async throws {
            let fleet = try FleetHarness()
            let coordinator = try fleet.startCoordinator()
            _ = try fleet.startAgent("late", synthetic: 1, fps: 15)
            try await fleet.waitUntil("the camera registers", seconds: 30) { try fleet.json(["devices"]).count == 1 }
            let device = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            try fleet.grantConsent(device)
            // Eight seconds ahead: the coordinator must be gone before the picture is taken, and
            // seeing the still in the index takes CLI calls that a loaded machine runs slowly
            // (seen in full runs: with four seconds the picture was sometimes answered first).
            let asked = Task.detached { try fleet.cli(["still", device, "--size", "640x480", "--at", "+8s"], timeout: 30) }
            try await fleet.waitUntil("the still is in the index", seconds: 10) { try fleet.json(["stills", "list"]).count == 1 }
            let stillID = try #require(try fleet.json(["stills", "list"]).first?["id"] as? String)
            kill(coordinator.process.processIdentifier, SIGKILL)
            coordinator.process.waitUntilExit()
            // The picture is taken and written while the coordinator is away.
            try await Task.sleep(for: .seconds(10))
            try fleet.startCoordinator()
            let restarted = Date()
            try await fleet.waitUntil("the still's picture is copied", seconds: 60) {
                (try fleet.jsonObject(["stills", "show", stillID])["state"] as? String) == "stored"
            }
            print(
                "stills: the picture taken while the coordinator was away was stored \(String(format: "%.1f", Date().timeIntervalSince(restarted))) s after it restarted"
            )
            let shown = try fleet.jsonObject(["stills", "show", stillID])
            let camera = try #require((shown["cameras"] as? [[String: Any]])?.first, "\(shown)")
            #expect(camera["state"] as? String == "stored" && (camera["error"] as? String ?? "").isEmpty, "\(camera)")
            let output = fleet.directory + "/late"
            #expect(try fleet.cli(["stills", "export", stillID, "--to", output]).status == 0)
            let picture = try Self.inspect(output + "/\(device)-1.png")
            #expect(picture.width == 640 && picture.height == 480, "\(picture)")
            let spread = try #require(try Self.sidecar(output + "/\(device)-1.json")["spread_ns"] as? Int)
            #expect(abs(spread) <= 70_000_000, "the frame nearest the instant, though nobody waited for it: \(spread) ns")
            // The agent keeps no copy, and reports nothing more.
            let held = fleet.directory + "/late/recordings/stills/\(stillID)"
            try await fleet.waitUntil("the agent lets go of its copy", seconds: 20) { !FileManager.default.fileExists(atPath: held) }
            // The CLI waits as long as the still may take (a minute) for an answer that will not come.
            let stop = Process()
            stop.executableURL = URL(fileURLWithPath: "/usr/bin/pkill")
            stop.arguments = ["-f", "still \(device) --size 640x480 --at"]
            try stop.run()
            stop.waitUntilExit()
            // It lost its coordinator, unless the restarted one answered it (seen on a fast
            // machine): then it describes this same still, never another.
            let lost = try await asked.value
            #expect(lost.status != 0 || lost.output.contains(stillID), "the CLI lost its coordinator: \(lost.output)")
        }
    }
}
