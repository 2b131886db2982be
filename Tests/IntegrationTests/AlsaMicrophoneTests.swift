import Foundation
import Testing

extension IntegrationTests {
    /// A real ALSA driver (proto-docs/microphones.md, "ALSA capture devices"): the VM rig's
    /// snd-aloop loopback card, a known click train played into one side of it
    /// (Tests/vm/alsa-click-player.py) and captured from the other by the guest's agent, heard
    /// recorded in a take and heard live on this host through `capfleet listen`, every click at
    /// the instant it was played within the bound the agent's blocks carry.
    @Suite struct AlsaMicrophoneTests {
        @Test func aLoopbackClickTrain_isRecordedWithTheDriversTimes_eachClickWithinTheReportedBound() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let share = fleet.directory + "/vm"
            let agent = try VividRig.agentCommand(
                share: share, fleet: fleet, name: "sound-host", devices: [], options: "--microphone hw:CARD=Loopback,DEV=1 --log-level info")
            let guest = """
                S=\(share)
                arecord -l > $S/arecord.txt 2>&1
                \(agent) >> $S/agent.log 2>&1 &
                echo $! > /tmp/agent.pid
                \(VividRig.commandLoop(share: share))
                \(VividRig.stopAgent())
                """
            let rig = try VividRig(
                share: share, vividParameters: "n_devs=1 node_types=0x1", forwardPorts: VividRig.ports(of: fleet), guestScript: guest)
            defer { rig.stop() }
            func context() -> String {
                "\n--- VM ---\n\(rig.log.suffix(2000))\n--- agent in the guest ---\n\(rig.file("agent.log")?.suffix(4000) ?? "none")"
            }
            func step(_ what: String, seconds: Double, _ condition: () throws -> Bool) async throws {
                do {
                    _ = try await fleet.waitUntil(what, seconds: seconds, condition)
                } catch {
                    Issue.record("\(error)\(context())")
                    throw error
                }
            }

            // Found by its card's id, never hw:N; opened as hw: in its first format.
            try await step("the guest's agent registers the loopback's capture device", seconds: 180) {
                try fleet.json(["devices"]).contains { $0["kind"] as? String == "alsa" }
            }
            let microphone = try #require(try fleet.json(["devices"]).first { $0["kind"] as? String == "alsa" }?["device_id"] as? String)
            #expect(microphone == "alsa-Loopback-1")
            let details = try fleet.jsonObject(["device", microphone])
            #expect(details["device_path"] as? String == "hw:CARD=Loopback,DEV=1", "\(details)")
            #expect(rig.file("agent.log")?.contains("48 kHz 2 ch S16_LE") == true, "\(context())")
            try fleet.grantConsent(microphone)
            try await step("the guest's clock has an estimate of fleet time", seconds: 60) {
                try fleet.json(["clock"]).contains { ["synchronising", "locked"].contains($0["sync"] as? String ?? "") }
            }
            try await step("the microphone's clock is fitted on the driver's timestamps", seconds: 30) {
                let clock = try fleet.deviceStats()[microphone]?["audio_clock"] as? [String: Any]
                return clock?["timestamp_source"] as? String == "driver" && clock?["rate_ppm"] is Double
            }

            // Record it, and listen on this host, while the guest plays 15 clicks, one every half
            // second from its first second.
            let takeID = try SecondLaneIntegrationTests.RecordingTests.start([microphone], in: fleet)
            let wav = fleet.directory + "/loopback.wav", blocks = fleet.directory + "/loopback.csv"
            let listener = try fleet.launch(
                "listen",
                [
                    "listen", microphone, "-o", wav, "--blocks", blocks, "--seconds", "16", "--coordinator", "127.0.0.1:\(fleet.operatorPort)",
                    "--credential", try fleet.credential(for: "ana"),
                ])
            try await step("sound flows to the listener", seconds: 20) {
                (try? String(contentsOfFile: blocks, encoding: .utf8))?.split(separator: "\n").count ?? 0 > 50
            }
            // The player goes through the share: the guest's /tmp is a tmpfs of its own, so a
            // repository cloned under /tmp is not at its path there.
            try? FileManager.default.removeItem(atPath: share + "/alsa-click-player.py")
            try FileManager.default.copyItem(atPath: VividRig.repository + "/Tests/vm/alsa-click-player.py", toPath: share + "/alsa-click-player.py")
            let played = try rig.run("python3 \(share)/alsa-click-player.py hw:CARD=Loopback,DEV=0 9 \(share)/played.json", timeout: 60)
            #expect(played.status == 0, "\(played.output)")
            let stopped = try fleet.cli(["record", "stop", takeID], timeout: 60)
            #expect(stopped.status == 0, "\(stopped.error)")
            try await step("the listener finishes", seconds: 30) { !listener.isRunning }

            let playedJSON = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: share + "/played.json"))) as? [String: Any])
            let playedClicks = ((playedJSON["clicks"] as? [[String: Any]]) ?? []).compactMap { ($0["monotonic_ns"] as? NSNumber)?.int64Value }
            #expect(playedClicks.count == 15)
            let stats = try fleet.deviceStats()[microphone] ?? [:]
            print("alsa: played \(playedClicks.count) clicks (player's fit \(playedJSON["fit"] ?? [:])); audio clock \(stats["audio_clock"] ?? [:])")

            // Live: the blocks a listener got (the live path drops what a slow listener misses;
            // the take does not) put each click where it was played, within their bound.
            let heard = try SecondLaneIntegrationTests.MicrophoneTests.clickFleetTimes(wav: wav, blocks: blocks)
            // Newest wins on the live path: a listener on a busy machine misses blocks (and the
            // clicks in them), which the take below keeps.
            #expect(heard.count >= 3, "heard \(heard.map(\.monotonicNs)), played \(playedClicks)")
            var errors: [Int64] = []
            for click in heard {
                // The same clock (the guest's CLOCK_MONOTONIC) on both sides.
                let nearest = try #require(playedClicks.min { abs($0 - Int64(click.monotonicNs)) < abs($1 - Int64(click.monotonicNs)) })
                let error = Int64(click.monotonicNs) - nearest
                errors.append(error)
                #expect(abs(error) <= Int64(click.uncertaintyNs), "a click \(error) ns from when it was played, bound \(click.uncertaintyNs) ns")
            }
            let live = errors.map { abs($0) }.sorted()
            print(
                "alsa: live, \(heard.count) clicks heard, |click - played| median \(live.isEmpty ? 0 : live[live.count / 2] / 1000) µs, max \((live.last ?? 0) / 1000) µs; bounds \(heard.map { $0.uncertaintyNs / 1000 }.prefix(3)) µs"
            )

            // Recorded: every click in the take's FLAC files, at its fleet time within the bound the
            // agent reported (the blocks' uncertainty, plus the file's millisecond rounding). The
            // player's times go into fleet time by the agent's own clock, read off the blocks.
            let rows = try String(contentsOfFile: blocks, encoding: .utf8).split(separator: "\n").dropFirst()
                .map { $0.split(separator: ",", omittingEmptySubsequences: false) }
                .compactMap { row -> (monotonic: Int64, fleet: Int64, uncertainty: Int64)? in
                    guard let mono = Int64(row[2]), let fleet = Int64(row[3]), let bound = Int64(row[4]) else { return nil }
                    return (mono, fleet, bound)
                }
            let take = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            let startNs = try #require((take["start_fleet_ns"] as? NSNumber)?.int64Value, "\(take)")
            var recorded: [Int64] = []
            for segment in (take["segments"] as? [[String: Any]]) ?? [] {
                let path = try #require(segment["path"] as? String)
                #expect(try SecondLaneIntegrationTests.MicrophoneTests.audioStream(path) == ["flac", "48000", "2"], "\(path)")
                recorded += try SecondLaneIntegrationTests.MicrophoneTests.clicksInSegment(path, scratch: fleet.directory).map { startNs + Int64($0) }
            }
            #expect(recorded.count == playedClicks.count, "recorded \(recorded), played \(playedClicks)")
            var fileErrors: [Int64] = []
            for playedAt in playedClicks {
                let row = try #require(rows.min { abs($0.monotonic - playedAt) < abs($1.monotonic - playedAt) })
                let playedFleet = playedAt + (row.fleet - row.monotonic)
                let nearest = try #require(recorded.min { abs($0 - playedFleet) < abs($1 - playedFleet) })
                fileErrors.append(nearest - playedFleet)
                #expect(
                    abs(nearest - playedFleet) <= row.uncertainty + 500_000,
                    "a recorded click \(nearest - playedFleet) ns from its fleet time, bound \(row.uncertainty) ns")
            }
            let inFiles = fileErrors.map { abs($0) }.sorted()
            print(
                "alsa: recorded, \(recorded.count) clicks, |click - played| median \(inFiles.isEmpty ? 0 : inFiles[inFiles.count / 2] / 1000) µs, max \((inFiles.last ?? 0) / 1000) µs"
            )
            let verified = try fleet.cli(["recordings", "verify", takeID], timeout: 120)
            #expect(verified.status == 0, "\(verified.output)\(verified.error)")
            let clock = try #require(stats["audio_clock"] as? [String: Any])
            #expect(abs(clock["rate_ppm"] as? Double ?? 1e6) < 500, "the loopback runs on the guest's own timer: \(clock)")
        }
    }
}
