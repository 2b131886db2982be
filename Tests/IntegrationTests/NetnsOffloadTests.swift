import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension IntegrationTests {
    /// Takes offloaded on the namespace bed (deploy/netns-fleet.sh --storage webdav): the
    /// studio's storage is a host of its own on the bridge. A take recorded on three hosts goes
    /// there from each host at once; the bytes leave the agent hosts for the storage host and
    /// none pass the coordinator's link; the storage host's link is cut mid-upload and one
    /// agent is killed mid-upload, and every segment is still proved there, nothing sent
    /// twice but the copies cut off.
    @Suite(.serialized) struct NetnsOffloadTests {
        @Test func aTakeOnThreeHosts_isOffloadedStraightToTheStorageHost_throughACutLinkAndAKill() async throws {
            guard getuid() == 0 else {
                print("netns offload: not run, network namespaces need root (CI runs as root)")
                return
            }
            let fleet = NetnsTestFleet(prefix: "cfo\(getpid() % 10_000)")
            defer { fleet.down() }
            // 4 MB/s a host: a copy takes seconds, long enough to be cut.
            try fleet.run([
                "up", "--agents", "3", "--bin", FleetHarness.binary, "--storage", "webdav", "--setting", "collect_rate_mb=4",
                "--agent-args", "--fps 15 --no-pressure",
            ])
            _ = try await NetnsTestFleet.waitUntil("three clocks lock", seconds: 40) {
                let clocks = try fleet.json(["clock"])
                return clocks.count == 3 && clocks.allSatisfy { $0["sync"] as? String == "locked" }
            }
            let devices = try fleet.json(["devices"]).compactMap { $0["device_id"] as? String }.sorted()
            for device in devices { try fleet.run(["cli", "consent", "grant", device, "--reason", "offload bed"]) }
            let started = try fleet.run(["cli", "record", "start"] + devices + ["--name", "offload", "--json", "--timeout", "15"])
            let takeID = try #require((try JSONSerialization.jsonObject(with: Data(started.utf8)) as? [String: Any])?["id"] as? String, "\(started)")
            try await Task.sleep(for: .seconds(5))
            try fleet.run(["cli", "record", "stop", takeID, "--wait", "60", "--timeout", "70"])
            try fleet.run([
                "cli", "storage", "add", "studio", "--backend", "webdav", "--option", "url=http://10.77.0.5:8070", "--option", "vendor=other",
                "--option", "user=studio", "--secret", "pass=@\(fleet.data)/storage.password", "--root", "takes",
            ])
            func shown() throws -> [String: Any] {
                let text = try fleet.run(["cli", "recordings", "show", takeID, "--json"])
                return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
            }
            let segments = try #require(try shown()["segments"] as? [[String: Any]])
            let total = segments.reduce(0) { $0 + ($1["size_bytes"] as? Int ?? 0) }
            let largest = segments.map { $0["size_bytes"] as? Int ?? 0 }.max() ?? 0
            #expect(Set(segments.compactMap { $0["location"] as? String }).count == 3, "three hosts hold parts")

            func counter(_ host: String, _ name: String) throws -> Int {
                Int(try fleet.run(["exec", host, "cat", "/sys/class/net/eth0/statistics/\(name)"]).trimmingCharacters(in: .whitespacesAndNewlines))
                    ?? -1
            }
            let storageBefore = try counter("st", "rx_bytes")
            let coordinatorBefore = try counter("coord", "rx_bytes") + counter("coord", "tx_bytes")
            let agentsBefore = try (1...3).map { try counter("a\($0)", "tx_bytes") }

            try fleet.run(["cli", "recordings", "offload", takeID, "--to", "studio", "--no-wait"])
            try await Task.sleep(for: .seconds(2))
            // The storage host's cable pulled for 4 s, then an agent killed mid-copy.
            try fleet.run(["partition", "storage"])
            try await Task.sleep(for: .seconds(4))
            try fleet.run(["heal", "storage"])
            try await Task.sleep(for: .seconds(1))
            try fleet.run(["restart-agent", "2"])
            _ = try await NetnsTestFleet.waitUntil("every segment is proved on the storage host", seconds: 180) {
                let offload = (try shown()["offloads"] as? [[String: Any]])?.first
                return offload?["running"] as? Bool == false
            }
            let index = try shown()
            let offload = try #require((index["offloads"] as? [[String: Any]])?.first)
            print("netns offload: \(offload)")
            #expect(offload["verified"] as? Int == segments.count && offload["pending_bytes"] as? Int == 0, "\(offload)")
            for segment in try #require(index["segments"] as? [[String: Any]]) {
                let copy = try #require((segment["copies"] as? [[String: Any]])?.first, "\(segment)")
                #expect(copy["state"] as? String == "verified" && copy["sent_by"] as? String == segment["location"] as? String, "\(copy)")
                let path = try #require(segment["path"] as? String)
                let object = fleet.data + "/storage/" + (copy["object_path"] as? String ?? "")
                #expect(FileManager.default.contents(atPath: object) == FileManager.default.contents(atPath: path), "\(object) is \(path)")
            }
            #expect(FileManager.default.fileExists(atPath: fleet.data + "/storage/takes/\(takeID)/take.json"))

            let storageReceived = try counter("st", "rx_bytes") - storageBefore
            let coordinatorMoved = try counter("coord", "rx_bytes") + counter("coord", "tx_bytes") - coordinatorBefore
            let agentsSent = try (1...3).map { try counter("a\($0)", "tx_bytes") }.enumerated().map { $0.element - agentsBefore[$0.offset] }
            print(
                "netns offload: \(total) bytes of segments; the storage host received \(storageReceived), the agent hosts sent \(agentsSent), the coordinator's link moved \(coordinatorMoved)"
            )
            #expect(storageReceived >= total, "every segment reached the storage host")
            #expect(agentsSent.allSatisfy { $0 >= total / 6 }, "each host sent its own share: \(agentsSent)")
            #expect(coordinatorMoved < total / 10, "no part crossed the coordinator: its link moved \(coordinatorMoved) of \(total)")
            // Resent: at most the copies that were cut off (the killed agent's, and one a host
            // whose upload the cut link ended), plus HTTP and TCP's own bytes.
            #expect(storageReceived <= total + 4 * largest + total / 10, "nothing that arrived whole was sent again: \(storageReceived) for \(total)")
        }
    }
}
