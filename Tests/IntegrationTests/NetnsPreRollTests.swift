import FleetTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension SecondLaneIntegrationTests {
    /// Pre-roll (recordings.md, "Pre-roll"): three namespace hosts' cameras keep their last
    /// seconds, and a take started with `--pre-roll 3s` begins 3 s before its instant on every
    /// camera, each first frame within one frame interval of that earlier start; a camera
    /// without a pre-roll is named in the refusal; off, nothing is kept.
    @Suite struct NetnsPreRollTests {
        @Test func aTakeWithPreRoll_beginsSecondsBeforeItsInstant_onEveryHost() async throws {
            guard getuid() == 0 else {
                print("netns pre-roll: not run, network namespaces need root (CI runs as root)")
                return
            }
            let fleet = NetnsTestFleet(prefix: "cfp\(getpid() % 10_000)")
            defer { fleet.down() }
            try fleet.run(["up", "--agents", "3", "--bin", FleetHarness.binary, "--agent-args", "--fps 10 --no-pressure"])
            _ = try await NetnsTestFleet.waitUntil("three clocks lock", seconds: 40) {
                let clocks = try fleet.json(["clock"])
                return clocks.count == 3 && clocks.allSatisfy { $0["sync"] as? String == "locked" }
            }
            let cameras = try fleet.json(["devices"]).compactMap { $0["device_id"] as? String }.sorted()
            #expect(cameras.count == 3)
            for camera in cameras {
                try fleet.run(["cli", "consent", "grant", camera, "--reason", "pre-roll test"])
                try fleet.run(["cli", "lock", camera])
            }
            func kept() throws -> [String: [String: Any]] {
                let text = try fleet.run(["cli", "preroll"] + cameras + ["--json"])
                let entries = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]] ?? []
                return entries.reduce(into: [:]) { $0[$1["device"] as? String ?? "?"] = $1 }
            }
            #expect(try kept().values.allSatisfy { $0["milliseconds"] as? Int == 0 && $0["kept_frames"] == nil }, "off: nothing kept")
            // A camera without pre-roll: the take is refused, naming it.
            do {
                _ = try fleet.run(["cli", "record", "start"] + cameras + ["--pre-roll", "3s"])
                Issue.record("a take with pre-roll started on cameras that keep none")
            } catch {
                #expect("\(error)".contains("keeps no pre-roll") && "\(error)".contains("capfleet preroll"), "\(error)")
            }
            let set = try fleet.run(["cli", "preroll"] + cameras + ["4s"])
            print("netns pre-roll: \(set.trimmingCharacters(in: .whitespacesAndNewlines))")
            _ = try await NetnsTestFleet.waitUntil("every camera keeps 3.5 s", seconds: 20) {
                try kept().values.allSatisfy { ($0["kept_ns"] as? Int ?? 0) >= 3_500_000_000 }
            }
            let figures = try kept()
            print("netns pre-roll: kept \(figures.mapValues { "\($0["kept_frames"] ?? "?") frames, \($0["kept_bytes"] ?? "?") bytes" })")
            for camera in cameras {
                // Four seconds at 10 fps, never more than the four seconds asked for.
                let frames = figures[camera]?["kept_frames"] as? Int ?? 0
                #expect((36...41).contains(frames), "\(camera): \(figures[camera] ?? [:])")
            }

            let started = try fleet.run(
                ["cli", "record", "start"] + cameras + ["--pre-roll", "3s", "--name", "pre-roll", "--json", "--timeout", "15"])
            let take = try #require(try JSONSerialization.jsonObject(with: Data(started.utf8)) as? [String: Any], "\(started)")
            let takeID = try #require(take["id"] as? String)
            #expect(take["pre_roll_ms"] as? Int == 3_000, "\(take)")
            let start = try #require(take["start_fleet_ns"] as? Int)
            try await Task.sleep(for: .seconds(3))
            try fleet.run(["cli", "record", "stop", takeID, "--wait", "60", "--timeout", "70"])
            let shownText = try fleet.run(["cli", "recordings", "show", takeID, "--json"])
            let shown = try #require(try JSONSerialization.jsonObject(with: Data(shownText.utf8)) as? [String: Any], "\(shownText)")
            let stop = try #require(shown["stop_fleet_ns"] as? Int)
            for part in shown["devices"] as? [[String: Any]] ?? [] {
                let first = part["first_fleet_ns"] as? Int ?? 0
                let frames = part["frames"] as? Int ?? 0
                let span = Double(stop - start) / 1e9
                print(
                    "netns pre-roll: \(part["device_id"] ?? "?"): first frame \(Double(first - start) / 1e6) ms after the start, \(frames) frames over \(span) s, drops \(part["drops"] ?? [:])"
                )
                // The first frame within one interval (100 ms) of the start, 3 s before the instant.
                #expect(first >= start && first - start <= 100_000_000, "\(part)")
                #expect(abs(Double(frames) - span * 10) <= 3, "every frame from the earlier start on: \(part)")
                #expect((part["drops"] as? [String: Int] ?? [:]).values.allSatisfy { $0 == 0 }, "\(part)")
            }
            let verified = try fleet.run(["cli", "recordings", "verify", takeID, "--timeout", "120"])
            #expect(verified.contains("verified"), "\(verified)")

            // A moment: a still of every camera at one instant, and a take from 2 s before it to 1 s after.
            let momentText = try fleet.run(["cli", "moment"] + cameras + ["--before", "2s", "--after", "1s", "--name", "a moment", "--json"])
            let moment = try #require(try JSONSerialization.jsonObject(with: Data(momentText.utf8)) as? [String: Any], "\(momentText)")
            let instant = try #require(moment["instant_fleet_ns"] as? Int)
            let momentTake = try #require(moment["take"] as? [String: Any], "\(moment)")
            let momentStill = try #require(moment["still"] as? [String: Any], "\(moment)")
            #expect(momentTake["start_fleet_ns"] as? Int == instant - 2_000_000_000 && momentTake["stop_fleet_ns"] as? Int == instant + 1_000_000_000)
            #expect(momentTake["state"] as? String == "stopped", "answered once the take is stored: \(momentTake)")
            for part in momentTake["devices"] as? [[String: Any]] ?? [] {
                let frames = part["frames"] as? Int ?? 0
                #expect(abs(frames - 30) <= 2, "3 s at 10 fps around the instant: \(part)")
                #expect((part["first_fleet_ns"] as? Int ?? 0) - (instant - 2_000_000_000) <= 100_000_000, "\(part)")
            }
            let pictures = (momentStill["cameras"] as? [[String: Any]] ?? []).flatMap { $0["pictures"] as? [[String: Any]] ?? [] }
            print(
                "netns pre-roll: moment \(moment["id"] ?? "?"): take \(momentTake["id"] ?? "?"), still \(momentStill["id"] ?? "?"), \(pictures.count) pictures"
            )
            #expect(pictures.count == 3, "\(momentStill)")
            for picture in pictures {
                // Each picture is the camera's frame nearest the instant: within half an interval.
                let at = picture["fleet_time_ns"] as? Int ?? 0
                #expect(abs(at - instant) <= 50_000_000, "\(picture)")
            }
            let listed = try fleet.json(["moments"])
            #expect(listed.first?["id"] as? String == moment["id"] as? String && listed.first?["take_id"] as? String == momentTake["id"] as? String)

            // Kept encoded (recordings.md, "Encoded pre-roll"): the take starts on the whole
            // fleet second before its reach, on every host at once, each part on its key frame.
            try fleet.run(["cli", "preroll"] + cameras + ["4s", "--codec", "h264"])
            _ = try await NetnsTestFleet.waitUntil("every camera keeps 3.5 s encoded", seconds: 20) {
                try kept().values.allSatisfy { ($0["kept_ns"] as? Int ?? 0) >= 3_500_000_000 && $0["encoding"] as? String == "h264, crf 23" }
            }
            let encodedText = try fleet.run(["cli", "record", "start"] + cameras + ["--pre-roll", "3s", "--json", "--timeout", "15"])
            let encodedTake = try #require(try JSONSerialization.jsonObject(with: Data(encodedText.utf8)) as? [String: Any], "\(encodedText)")
            let encodedID = try #require(encodedTake["id"] as? String)
            let encodedStart = try #require(encodedTake["start_fleet_ns"] as? Int)
            #expect(encodedStart % 1_000_000_000 == 0, "on a whole fleet second: \(encodedStart)")
            try await Task.sleep(for: .seconds(2))
            try fleet.run(["cli", "record", "stop", encodedID, "--wait", "60", "--timeout", "70"])
            let encodedShown = try #require(
                try JSONSerialization.jsonObject(with: Data(try fleet.run(["cli", "recordings", "show", encodedID, "--json"]).utf8)) as? [String: Any]
            )
            let encodedStop = try #require(encodedShown["stop_fleet_ns"] as? Int)
            for part in encodedShown["devices"] as? [[String: Any]] ?? [] {
                let first = part["first_fleet_ns"] as? Int ?? 0
                let frames = part["frames"] as? Int ?? 0
                print(
                    "netns pre-roll: encoded \(part["device_id"] ?? "?"): first frame \(Double(first - encodedStart) / 1e6) ms after the start, \(frames) frames, \(part["codec"] ?? "?")"
                )
                #expect(first >= encodedStart && first - encodedStart <= 100_000_000, "\(part)")
                #expect(abs(Double(frames) - Double(encodedStop - encodedStart) / 1e8) <= 3, "every frame from the key frame on: \(part)")
                #expect((part["drops"] as? [String: Int] ?? [:]).values.allSatisfy { $0 == 0 } && part["encoder"] as? String == "libx264", "\(part)")
            }
            #expect(try fleet.run(["cli", "recordings", "verify", encodedID, "--timeout", "120"]).contains("verified"))

            // Off again: everything kept is freed.
            try fleet.run(["cli", "preroll"] + cameras + ["--off"])
            _ = try await NetnsTestFleet.waitUntil("every camera reports its pre-roll off", seconds: 10) {
                try kept().values.allSatisfy { $0["milliseconds"] as? Int == 0 && $0["kept_frames"] == nil }
            }
        }
    }
}
