import FleetHost
import FleetTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension SecondLaneIntegrationTests {
    /// A fleet across hosts: deploy/netns-fleet.sh puts the coordinator and two agents on
    /// network namespaces of their own, each agent's link through `capfleet-relay` at
    /// 2 ms ± 100 µs each way, and each agent's clock skewed by a known amount. The agents
    /// register from their own addresses, lock onto fleet time through the impaired links,
    /// and a crashed agent comes back and locks again; `down` leaves nothing behind.
    @Suite struct NetnsFleetTests {
        @Test func agentsOnNamespaceHosts_registerAndSyncThroughImpairedLinks() async throws {
            guard getuid() == 0 else {
                print("netns fleet: not run, network namespaces need root (CI runs as root)")
                return
            }
            let fleet = NetnsTestFleet(prefix: "cft\(getpid() % 10_000)")
            defer { fleet.down() }
            try fleet.run([
                "up", "--agents", "2", "--bin", FleetHarness.binary, "--impair", "delay=2ms,jitter=100us",
                "--skew", "1=+3.2s,+50ppm", "--skew", "2=-1.5s,-50ppm", "--agent-args", "--fps 15 --no-pressure",
                "--setting", "cpu_latency_us=0",
            ])
            // --setting reaches the coordinator and each agent as CAPFLEET_CPU_LATENCY_US.
            let holding = "holding this host's CPU wake-up latency at 0 µs or less"
            for name in ["coordinator", "agent-a1", "agent-a2"] {
                #expect(try fleet.log(name).contains(holding), "\(name) holds no CPU latency request")
            }
            #expect(CPULatencyRequest.current() == 0)

            let nodes = try fleet.json(["nodes"])
            #expect(nodes.count == 2)
            let addresses = nodes.compactMap { $0["address"] as? String }.sorted()
            #expect(addresses.count == 2 && addresses[0].hasPrefix("10.77.0.11") && addresses[1].hasPrefix("10.77.0.12"), "\(nodes)")

            // Both clocks lock through the relays; the round trip shows the links' 4 ms (a probe's
            // best, so as low as 3.8 ms where both ways drew 100 µs of jitter early).
            var clocks: [[String: Any]] = []
            let locked = try await waitUntil("both clocks lock", seconds: 20) {
                clocks = try fleet.json(["clock"])
                return clocks.count == 2 && clocks.allSatisfy { $0["sync"] as? String == "locked" }
            }
            print("netns fleet: both clocks locked \(locked) s after up: \(clocks)")
            for clock in clocks {
                let roundTrip = clock["round_trip_ns"] as? Int ?? 0
                #expect(roundTrip >= 3_800_000 && roundTrip < 10_000_000, "round trip \(roundTrip) ns through 2 ms ± 100 µs links")
            }
            // a1's wall clock runs 3.2 s plus 50 ppm of the machine's uptime ahead of fleet time.
            let a1 = try #require(clocks.first { $0["name"] as? String == "a1" }, "\(clocks)")
            let expected = 3.2e9 + 50e-6 * Double(Self.monotonicNow())
            let measured = Double(try #require(a1["wall_clock_offset_ns"] as? Int))
            #expect(abs(measured - expected) < 2_000_000, "a1 wall clock offset \(measured) ns, expected \(expected)")

            // The relay takes a new impairment while running.
            try fleet.run(["impair", "1", "delay=3ms"])
            let relayLog = try String(contentsOfFile: fleet.data + "/logs/relay-a1.log", encoding: .utf8)
            #expect(relayLog.contains("impairment now delay=3ms"), "\(relayLog.suffix(500))")

            // A crashed agent is back and locked again.
            try fleet.run(["restart-agent", "2"])
            let restarted = Date()
            let relock = try await waitUntil("the restarted agent locks again", seconds: 20) {
                let a2 = try fleet.json(["clock"]).first { $0["name"] as? String == "a2" }
                let heard = Double(a2?["reported_unix_ms"] as? Int ?? 0) / 1000
                return a2?["online"] as? Bool == true && a2?["sync"] as? String == "locked" && heard > restarted.timeIntervalSince1970
            }
            print("netns fleet: restarted agent locked again after \(relock) s")
            #expect(try fleet.log("agent-a2").components(separatedBy: holding).count == 3, "the restarted agent keeps its settings")

            fleet.down()
            let left = try fleet.namespaces()
            #expect(left.isEmpty, "namespaces left: \(left)")
        }

        /// A camera host loses the network for 30 s in the middle of a take (its link down):
        /// its agent keeps the take's frames (in memory, then on disk) and uploads them in order
        /// when the link is back, so the take has every frame, none dropped.
        @Test func aTakeAcrossA30SecondPartition_losesNoFrame() async throws {
            guard getuid() == 0 else {
                print("netns partition: not run, network namespaces need root (CI runs as root)")
                return
            }
            let fleet = NetnsTestFleet(prefix: "cfp\(getpid() % 10_000)")
            defer { fleet.down() }
            try fleet.run(["up", "--agents", "2", "--bin", FleetHarness.binary, "--agent-args", "--fps 15 --no-pressure"])
            _ = try await waitUntil("both clocks lock", seconds: 30) {
                let clocks = try fleet.json(["clock"])
                return clocks.count == 2 && clocks.allSatisfy { $0["sync"] as? String == "locked" }
            }
            let devices = try fleet.json(["devices"]).compactMap { $0["device_id"] as? String }.sorted()
            #expect(devices.count == 2)
            for device in devices { try fleet.run(["cli", "consent", "grant", device, "--reason", "partition test"]) }
            let started = try fleet.run(
                ["cli", "record", "start"] + devices + ["--name", "partition", "--store", "coordinator", "--json", "--timeout", "15"])
            let take = try #require(try JSONSerialization.jsonObject(with: Data(started.utf8)) as? [String: Any], "\(started)")
            let takeID = try #require(take["id"] as? String)

            try await Task.sleep(for: .seconds(3))
            try fleet.run(["partition", "1"])
            try await Task.sleep(for: .seconds(30))
            try fleet.run(["heal", "1"])
            // Back online, then its spool drains: 30 s of 640x480 frames, partly from disk.
            _ = try await waitUntil("a1 is back online", seconds: 30) {
                try fleet.json(["nodes"]).filter { $0["online"] as? Bool == true }.count == 2
            }
            try await Task.sleep(for: .seconds(5))
            let stopped = try fleet.run(["cli", "record", "stop", takeID, "--wait", "120", "--timeout", "130"])
            print("netns partition: \(stopped.trimmingCharacters(in: .whitespacesAndNewlines))")
            let shownText = try fleet.run(["cli", "recordings", "show", takeID, "--json"])
            let shown = try #require(try JSONSerialization.jsonObject(with: Data(shownText.utf8)) as? [String: Any], "\(shownText)")
            #expect(shown["state"] as? String == "stopped", "\(shown)")
            let skipped = try cameraSkipped(fleet)
            for part in try #require(shown["devices"] as? [[String: Any]]) {
                let drops = (part["drops"] as? [String: Int] ?? [:]).values.reduce(0, +)
                let first = part["first_sequence"] as? Int ?? 0, last = part["last_sequence"] as? Int ?? 0
                let cameraSkipped = skipped[part["device_id"] as? String ?? ""] ?? 0
                print(
                    "netns partition: \(part["device_id"] ?? "?") stored \(part["frames"] ?? 0) frames, \(first)…\(last), drops \(drops), the camera skipped \(cameraSkipped)"
                )
                // Nothing is lost to the partition: the only gaps are slots the camera itself
                // skipped (a synthetic camera on a machine this busy may miss one, and says so).
                #expect(drops <= cameraSkipped, "no frame lost across the partition: \(part)")
                #expect((part["frames"] as? Int ?? 0) + drops == last - first + 1, "every sequence number stored or counted: \(part)")
                #expect((part["frames"] as? Int ?? 0) >= 15 * 36, "at least 36 s at 15 fps: \(part)")
            }
            let verified = try fleet.run(["cli", "recordings", "verify", takeID, "--timeout", "120"])
            #expect(verified.contains("verified"), "\(verified)")
        }

        /// A take recorded on three namespace hosts (the default store): each host's files on its
        /// own disk, the index on the coordinator. One host loses the network for 10 s mid-take and
        /// records on; another is killed (SIGKILL) and comes back. The take accounts for every
        /// frame (what the kill lost counted as dropped), collect and verify pass, and ffprobe
        /// counts what the index says in every file.
        @Test func aTakeOnThreeHosts_isIndexedCollectedAndVerified_throughAPartitionAndAKill() async throws {
            guard getuid() == 0 else {
                print("netns agent take: not run, network namespaces need root (CI runs as root)")
                return
            }
            let fleet = NetnsTestFleet(prefix: "cfa\(getpid() % 10_000)")
            defer { fleet.down() }
            try fleet.run(["up", "--agents", "3", "--bin", FleetHarness.binary, "--agent-args", "--fps 15 --no-pressure"])
            _ = try await waitUntil("three clocks lock", seconds: 40) {
                let clocks = try fleet.json(["clock"])
                return clocks.count == 3 && clocks.allSatisfy { $0["sync"] as? String == "locked" }
            }
            let devices = try fleet.json(["devices"]).compactMap { $0["device_id"] as? String }.sorted()
            #expect(devices.count == 3)
            for device in devices { try fleet.run(["cli", "consent", "grant", device, "--reason", "three-host take"]) }
            let started = try fleet.run(["cli", "record", "start"] + devices + ["--name", "three hosts", "--json", "--timeout", "15"])
            let take = try #require(try JSONSerialization.jsonObject(with: Data(started.utf8)) as? [String: Any], "\(started)")
            let takeID = try #require(take["id"] as? String)
            #expect(take["store"] as? String == "agent")

            try await Task.sleep(for: .seconds(3))
            try fleet.run(["partition", "1"])
            try await Task.sleep(for: .seconds(2))
            try fleet.run(["restart-agent", "2"])
            try await Task.sleep(for: .seconds(8))
            try fleet.run(["heal", "1"])
            _ = try await waitUntil("every host is back online", seconds: 40) {
                try fleet.json(["nodes"]).filter { $0["online"] as? Bool == true }.count == 3
            }
            try await Task.sleep(for: .seconds(3))
            let stopped = try fleet.run(["cli", "record", "stop", takeID, "--wait", "60", "--timeout", "70"])
            print("netns agent take: \(stopped.trimmingCharacters(in: .whitespacesAndNewlines))")

            func shown() throws -> [String: Any] {
                let text = try fleet.run(["cli", "recordings", "show", takeID, "--json"])
                return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
            }
            var index = try shown()
            #expect(index["state"] as? String == "stopped", "\(index)")
            let skipped = try cameraSkipped(fleet)
            let nodes = try fleet.json(["nodes"])
            let hostOfNode = Dictionary(
                uniqueKeysWithValues: nodes.compactMap { node -> (String, String)? in
                    guard let id = node["node_id"] as? String, let name = node["name"] as? String else { return nil }
                    return (id, name)
                })
            for part in try #require(index["devices"] as? [[String: Any]]) {
                let drops = SecondLaneIntegrationTests.RecordingTests.dropTotal(part)
                let first = part["first_sequence"] as? Int ?? 0, last = part["last_sequence"] as? Int ?? 0
                let host = hostOfNode[part["node_id"] as? String ?? ""] ?? "?"
                print(
                    "netns agent take: \(host) \(part["device_id"] ?? "?") stored \(part["frames"] ?? 0) frames, \(first)…\(last), drops \(part["drops"] ?? [:])"
                )
                #expect(part["state"] as? String == "stopped", "\(part)")
                #expect((part["frames"] as? Int ?? 0) + drops == last - first + 1, "every frame of the span accounted for: \(part)")
                if host == "a2" {
                    #expect(drops > 0, "the killed agent's lost second counts as dropped: \(part)")
                } else {
                    let cameraSkipped = skipped[part["device_id"] as? String ?? ""] ?? 0
                    #expect(
                        drops <= cameraSkipped,
                        "the partitioned host and the quiet one recorded every frame the camera gave: \(part), the camera skipped \(cameraSkipped)")
                    #expect((part["frames"] as? Int ?? 0) >= 15 * 14, "at least 14 s at 15 fps: \(part)")
                }
            }
            for segment in try #require(index["segments"] as? [[String: Any]]) {
                let path = try #require(segment["path"] as? String)
                let host = hostOfNode[segment["location"] as? String ?? ""] ?? "?"
                #expect(path.hasPrefix(fleet.data + "/\(host)/state/recordings/\(takeID)/"), "on its own host's disk: \(path)")
                #expect(
                    try SecondLaneIntegrationTests.RecordingTests.ffprobeFrameCount(path) == segment["frames"] as? Int,
                    "ffprobe counts what the index says in \(path)")
            }
            #expect(
                (index["segments"] as? [[String: Any]] ?? []).contains { $0["state"] as? String == "repaired" },
                "the killed agent repaired its open segment")

            let collected = try fleet.run(["cli", "recordings", "collect", takeID, "--timeout", "60"])
            #expect(collected.contains("collected"), "\(collected)")
            index = try shown()
            #expect(index["agent_held_bytes"] as? Int == 0, "\(index)")
            let verified = try fleet.run(["cli", "recordings", "verify", takeID, "--timeout", "120"])
            #expect(verified.contains("verified"), "\(verified)")
        }

        /// Each device's slots its camera reported skipping (drops as discontinuity, from its
        /// last status): the gaps a take may hold that no network or store caused.
        func cameraSkipped(_ fleet: NetnsTestFleet) throws -> [String: Int] {
            Dictionary(
                uniqueKeysWithValues: try fleet.json(["watch", "--count", "1"]).map { status in
                    (status["device_id"] as? String ?? "", (status["drops"] as? [String: Any])?["discontinuity"] as? Int ?? 0)
                })
        }

        static func monotonicNow() -> UInt64 {
            var spec = timespec()
            clock_gettime(CLOCK_MONOTONIC, &spec)
            return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
        }

        func waitUntil(_ what: String, seconds: Double, _ condition: () throws -> Bool) async throws -> Double {
            try await NetnsTestFleet.waitUntil(what, seconds: seconds, condition)
        }
    }
}

/// deploy/netns-fleet.sh driven from a test (FleetTestSupport's `NetnsFleetScript`), with
/// what the tests ask of the fleet it builds.
struct NetnsTestFleet {
    let script: NetnsFleetScript
    var data: String { script.data }
    var prefix: String { script.prefix }

    init(prefix: String) {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        script = NetnsFleetScript(
            script: repository.appendingPathComponent("deploy/netns-fleet.sh").path, prefix: prefix,
            data: FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-netns-test-\(prefix)").path)
    }

    @discardableResult
    func run(_ arguments: [String]) throws -> String {
        try script.run(arguments, timeoutMilliseconds: 120_000)
    }

    /// A CLI listing run on the coordinator's host, as JSON.
    func json(_ arguments: [String]) throws -> [[String: Any]] {
        let output = try run(["cli"] + arguments + ["--json"])
        guard let parsed = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [[String: Any]] else {
            throw HarnessError("capfleet \(arguments.joined(separator: " ")) printed no JSON array: \(output)")
        }
        return parsed
    }

    /// What process `name` (coordinator, agent-a1, relay-a1, …) has logged so far.
    func log(_ name: String) throws -> String {
        try String(contentsOfFile: data + "/logs/\(name).log", encoding: .utf8)
    }

    /// This fleet's namespaces that exist now.
    func namespaces() throws -> [String] {
        let listing = data + "-namespaces.out"
        defer { try? FileManager.default.removeItem(atPath: listing) }
        try ShellCommand.run("ip netns list >'\(listing)'", environment: [:], timeoutMilliseconds: 10_000)
        return try String(contentsOfFile: listing, encoding: .utf8).split(separator: "\n")
            .map { String($0.split(separator: " ").first ?? "") }.filter { $0.hasPrefix(prefix + "-") }
    }

    func down() { script.down() }

    /// Seconds until `condition` holds, asked every 200 ms (its errors count as not yet).
    @discardableResult
    static func waitUntil(_ what: String, seconds: Double, _ condition: () throws -> Bool) async throws -> Double {
        let start = Date()
        var lastError: (any Error)?
        while Date().timeIntervalSince(start) < seconds {
            do { if try condition() { return Date().timeIntervalSince(start) } } catch { lastError = error }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw HarnessError("timed out after \(seconds) s waiting until \(what)" + (lastError.map { ": \($0)" } ?? ""))
    }
}
