import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension SecondLaneIntegrationTests {
    /// Takes recorded where the cameras are (`record start`, store agent by default): each
    /// agent writes its part on its own disk and the coordinator keeps the index; collect,
    /// verify and export work from there; agents and the coordinator killed mid-take lose
    /// nothing that was captured, or count it as dropped.
    @Suite(.serialized) struct AgentTakeTests {
        /// Two hosts record their cameras: files under each agent's own directory, the index on
        /// the coordinator with where each segment is; no full-rate frame crosses the network
        /// meanwhile; collect copies them (checked), verify and export pass, ffprobe counts what
        /// the index says.
        @Test func takeOnTheAgents_isWrittenOnEachHost_indexed_collected_verified_andExported() async throws {
            let fleet = try FleetHarness()
            let coordinator = try fleet.startCoordinator(environment: ["CAPFLEET_SEGMENT_SECONDS": "2"])
            let devices = try await SecondLaneIntegrationTests.RecordingTests.devices(in: fleet, agents: ["h1", "h2"], fps: 15)
            let started = try fleet.cli(["record", "start"] + devices + ["--name", "hosts", "--json"], timeout: 15)
            #expect(started.status == 0, "\(started.error)")
            let take = try #require(try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any])
            #expect(take["store"] as? String == "agent", "agent is the default store: \(take)")
            let takeID = try #require(take["id"] as? String)
            try await Task.sleep(for: .seconds(3))
            for device in try fleet.json(["devices"]) {
                #expect(device["live_flow"] as? Bool == false, "nobody watches: a take on the agents sends no full-rate frame: \(device)")
            }
            let noted = try fleet.cli(["record", "note", takeID, #"{"location":"stage 3"}"#])
            #expect(noted.status == 0, "\(noted.error)")
            try await Task.sleep(for: .seconds(2))
            let stopped = try fleet.cli(["record", "stop", takeID], timeout: 30)
            #expect(stopped.status == 0, "\(stopped.error)")

            var shown = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            #expect(shown["state"] as? String == "stopped", "\(shown)")
            #expect(shown["store"] as? String == "agent")
            let nodes = try fleet.nodes()
            for part in try #require(shown["devices"] as? [[String: Any]]) {
                #expect(part["state"] as? String == "stopped", "\(part)")
                #expect(try SecondLaneIntegrationTests.RecordingTests.lostByTheFleet(part, in: fleet) == 0, "\(part)")
                #expect((part["frames"] as? Int ?? 0) >= 60, "about 5 s at 15 fps: \(part)")
                #expect((part["segments"] as? Int ?? 0) >= 2, "2 s segments: \(part)")
                #expect(part["node_online"] as? Bool == true)
            }
            var segments = try #require(shown["segments"] as? [[String: Any]])
            for segment in segments {
                let path = try #require(segment["path"] as? String)
                let node = try #require(segment["location"] as? String)
                let name = try #require(nodes.first { $0["node_id"] as? String == node }?["name"] as? String, "segment on a known node: \(segment)")
                #expect(path.hasPrefix(fleet.directory + "/" + name + "/recordings/" + takeID + "/"), "written on its own host's disk: \(path)")
                #expect(FileManager.default.fileExists(atPath: path))
                #expect(
                    try SecondLaneIntegrationTests.RecordingTests.ffprobeFrameCount(path) == segment["frames"] as? Int,
                    "ffprobe counts what the index says in \(path)")
                #expect(segment["collected_path"] == nil)
            }
            // Timed metadata and sequence markers are in the files the agents wrote.
            let entries = try SecondLaneIntegrationTests.RecordingTests.metadataEntries(
                in: segments.filter { $0["device_id"] as? String == devices[0] }.compactMap { $0["path"] as? String })
            #expect(entries.contains { $0.contains("\"location\":\"stage 3\"") }, "the note is in the agent's file: \(entries.suffix(5))")
            #expect(entries.contains { $0.contains("\"kind\":\"sequence\"") }, "sequence markers are in the agent's file")
            #expect(
                !FileManager.default.fileExists(atPath: fleet.directory + "/coordinator/recordings/" + takeID + "/" + devices[0]),
                "nothing of it on the coordinator's disk before collect")

            let verifiedOnAgents = try fleet.cli(["recordings", "verify", takeID], timeout: 60)
            #expect(
                verifiedOnAgents.status == 0, "the agents check their files against the index: \(verifiedOnAgents.output)\(verifiedOnAgents.error)")
            // Half of the first segment already copied by an interrupted collect: it goes on from there.
            let firstSegment = try #require(segments.first)
            let firstPath = try #require(firstSegment["path"] as? String)
            let partialFolder = fleet.directory + "/coordinator/recordings/\(takeID)/\(firstSegment["device_id"] as? String ?? "")"
            try FileManager.default.createDirectory(atPath: partialFolder, withIntermediateDirectories: true)
            let whole = try Data(contentsOf: URL(fileURLWithPath: firstPath))
            try whole.prefix(whole.count / 2).write(
                to: URL(fileURLWithPath: partialFolder + "/" + (firstPath as NSString).lastPathComponent + ".partial"))
            let collected = try fleet.cli(["recordings", "collect", takeID], timeout: 120)
            #expect(collected.status == 0, "\(collected.output)\(collected.error)")
            shown = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            segments = try #require(shown["segments"] as? [[String: Any]])
            #expect(shown["agent_held_bytes"] as? Int == 0, "\(shown)")
            #expect(coordinator.log.contains("collect goes on from a partial copy"), "the interrupted copy was resumed")
            for segment in segments {
                let copy = try #require(segment["collected_path"] as? String, "\(segment)")
                #expect(copy.hasPrefix(fleet.directory + "/coordinator/"), "\(copy)")
                #expect(try SecondLaneIntegrationTests.RecordingTests.sha256sum(copy) == segment["sha256"] as? String)
            }
            let verified = try fleet.cli(["recordings", "verify", takeID], timeout: 60)
            #expect(verified.status == 0, "\(verified.output)\(verified.error)")
            let exported = try fleet.cli(["recordings", "export", takeID, "--to", fleet.directory + "/export"], timeout: 60)
            #expect(exported.status == 0 && exported.output.contains("every SHA-256 matches"), "\(exported.output)\(exported.error)")
            let listed = try fleet.cli(["recordings", "list"])
            #expect(listed.output.contains("agents, collected"), "\(listed.output)")
        }

        /// An agent killed (SIGKILL) mid-take repairs the segment it was writing when it starts
        /// again, reports it, and goes on with its part when the coordinator asks again; the
        /// frames lost across the restart are counted as dropped, so every frame of the part's
        /// span is accounted for and verify passes.
        @Test func agentKilledMidTake_repairsAndReportsItsSegment_andCountsTheGap() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let devices = try await SecondLaneIntegrationTests.RecordingTests.devices(in: fleet, agents: ["k1"], fps: 15)
            let takeID = try SecondLaneIntegrationTests.RecordingTests.start(devices, in: fleet, store: "agent")
            try await Task.sleep(for: .seconds(3))
            let victim = try #require(fleet.processes.first { $0.name.hasPrefix("k1-") })
            victim.kill()
            try await Task.sleep(for: .seconds(1))
            let again = try fleet.startAgent("k1", fps: 15)
            try await fleet.waitUntil("the restarted agent records again", seconds: 30) {
                again.log.contains("recording on this host") && again.log.contains(takeID)
            }
            #expect(again.log.contains("repaired"), "the segment open at the kill was repaired: \(again.log.suffix(3000))")
            try await Task.sleep(for: .seconds(3))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)
            let shown = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            #expect(shown["state"] as? String == "stopped", "\(shown)")
            let segments = try #require(shown["segments"] as? [[String: Any]])
            #expect(segments.contains { $0["state"] as? String == "repaired" }, "\(segments)")
            #expect(segments.count >= 2, "a new segment after the restart: \(segments)")
            for segment in segments {
                let path = try #require(segment["path"] as? String)
                #expect(
                    try SecondLaneIntegrationTests.RecordingTests.ffprobeFrameCount(path) == segment["frames"] as? Int,
                    "\(path) plays and holds what the index says")
            }
            let part = try #require((shown["devices"] as? [[String: Any]])?.first)
            let drops = try #require(part["drops"] as? [String: Int])
            let first = try #require(part["first_sequence"] as? Int), last = try #require(part["last_sequence"] as? Int)
            #expect(
                (part["frames"] as? Int ?? 0) + SecondLaneIntegrationTests.RecordingTests.dropTotal(part) == last - first + 1,
                "every frame of the span accounted for: \(part)")
            #expect((drops["discontinuity"] ?? 0) >= 10, "the second or so the agent was down counts as discontinuity: \(drops)")
            let verified = try fleet.cli(["recordings", "verify", takeID], timeout: 60)
            #expect(verified.status == 0, "\(verified.output)\(verified.error)")
        }

        /// The coordinator killed (SIGKILL) mid-take: the agents record on, on their own disks,
        /// and report every segment when it is back; the take has every frame.
        @Test func coordinatorKilledMidTake_theAgentsRecordOn_andReportWhenItIsBack() async throws {
            let fleet = try FleetHarness()
            let coordinator = try fleet.startCoordinator(environment: ["CAPFLEET_SEGMENT_SECONDS": "2"])
            let devices = try await SecondLaneIntegrationTests.RecordingTests.devices(in: fleet, agents: ["c1", "c2"], fps: 15)
            let takeID = try SecondLaneIntegrationTests.RecordingTests.start(devices, in: fleet, store: "agent")
            try await Task.sleep(for: .seconds(3))
            coordinator.kill()
            try await Task.sleep(for: .seconds(5))
            try fleet.startCoordinator(environment: ["CAPFLEET_SEGMENT_SECONDS": "2"])
            try await fleet.waitUntil("both agents are back", seconds: 20) { try fleet.onlineNodeIDs().count == 2 }
            try await Task.sleep(for: .seconds(2))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)
            let shown = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            #expect(shown["state"] as? String == "stopped", "\(shown)")
            let segments = try #require(shown["segments"] as? [[String: Any]])
            for part in try #require(shown["devices"] as? [[String: Any]]) {
                #expect(
                    try SecondLaneIntegrationTests.RecordingTests.lostByTheFleet(part, in: fleet) == 0,
                    "the agents recorded on while the coordinator was down: \(part)")
                let first = part["first_sequence"] as? Int ?? 0, last = part["last_sequence"] as? Int ?? 0
                #expect(
                    SecondLaneIntegrationTests.RecordingTests.spanAccounted(part),
                    "every sequence number stored or counted: \(part) (\(first)…\(last))")
                #expect((part["frames"] as? Int ?? 0) >= 140, "about 10 s at 15 fps: \(part)")
                let own = segments.filter { $0["device_id"] as? String == part["device_id"] as? String }
                #expect(own.reduce(0) { $0 + ($1["frames"] as? Int ?? 0) } == part["frames"] as? Int, "the segments indexed hold the part: \(own)")
            }
            let verified = try fleet.cli(["recordings", "verify", takeID], timeout: 60)
            #expect(verified.status == 0, "\(verified.output)\(verified.error)")
        }

        /// A host gone for good after its take: the take says which parts are missing and why,
        /// verify and collect name them, and the other host's parts are collected whole.
        @Test func aHostGoneForGood_leavesTheTakeSayingWhichPartsAreMissing() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let devices = try await SecondLaneIntegrationTests.RecordingTests.devices(in: fleet, agents: ["g1", "g2"], fps: 15)
            let takeID = try SecondLaneIntegrationTests.RecordingTests.start(devices, in: fleet, store: "agent")
            try await Task.sleep(for: .seconds(3))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)
            let gone = try #require(fleet.processes.first { $0.name.hasPrefix("g2-") })
            let goneNode = try #require(try fleet.nodes().first { $0["name"] as? String == "g2" }?["node_id"] as? String)
            gone.kill()
            try await fleet.waitUntil("g2 is offline", seconds: 30) { try fleet.onlineNodeIDs().count == 1 }

            let shownText = try fleet.cli(["recordings", "show", takeID])
            #expect(shownText.output.contains("node \(goneNode), OFFLINE: missing until it is back"), "\(shownText.output)")
            let listed = try fleet.cli(["recordings", "list"])
            #expect(listed.output.contains("1 node(s) offline"), "\(listed.output)")
            let verified = try fleet.cli(["recordings", "verify", takeID], timeout: 60)
            #expect(
                verified.status != 0 && verified.output.contains("only on node \(goneNode), which is offline"), "\(verified.output)\(verified.error)")
            let collected = try fleet.cli(["recordings", "collect", takeID], timeout: 120)
            #expect(collected.status != 0 && (collected.output + collected.error).contains(goneNode), "\(collected.output)\(collected.error)")
            let shown = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            for segment in try #require(shown["segments"] as? [[String: Any]]) {
                let onGone = segment["location"] as? String == goneNode
                #expect((segment["collected_path"] != nil) == !onGone, "the reachable host's parts are collected, the gone one's are not: \(segment)")
            }
        }
    }
}
