import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

extension IntegrationTests {
    /// Many agents on one coordinator (issue "A data plane that grows with the fleet", "Many
    /// agents"): real `capfleet agent` processes with one small synthetic camera each, enrolled
    /// with one token for all of them, every one registered and clock-locked, and the operator's
    /// listings naming every node and camera.
    ///
    /// CAPFLEET_MANY_AGENTS sets how many (default 10, so that `swift test` stays quick);
    /// scripts/test.sh runs it again at 200 with the release binary (CAPFLEET_BINARY) in a step
    /// of its own, after the rest of the suite, so that two hundred processes on this machine's
    /// cores never slow down another test.
    @Suite struct ManyAgentsTests {
        static var agentCount: Int {
            ProcessInfo.processInfo.environment["CAPFLEET_MANY_AGENTS"].flatMap { Int($0) }.map { max($0, 1) } ?? 10
        }

        /// The smallest camera there is: a fleet this size measures the coordinator, not capture.
        static func agent(_ fleet: FleetHarness, _ index: Int, token: String) -> [String] {
            [
                "agent", "--coordinator", "127.0.0.1:\(fleet.controlPort)", "--state-dir", fleet.directory + "/host-\(index)",
                "--enroll", token, "--synthetic", "1", "--synthetic-format", "160x120:YUYV", "--fps", "1", "--no-discover",
                "--no-pressure", "--log-level", "notice",
            ]
        }

        @Test func manyAgents_allRegisterAndLockTheirClocks_andTheListingsNameEveryNodeAndCamera() async throws {
            let count = Self.agentCount
            let fleet = try FleetHarness()
            defer { fleet.fleet.kill() }
            try fleet.startCoordinator()
            let made = try fleet.cli(["enroll", "--uses", "\(count)", "--name-prefix", "many-", "--valid", "3600", "--quiet"], timeout: 10)
            #expect(made.status == 0, "\(made.error)")
            let token = made.output.trimmingCharacters(in: .whitespacesAndNewlines)

            let started = Date()
            for index in 1...count {
                try fleet.launch("host-\(index)", Self.agent(fleet, index, token: token))
                // A moment between starts: two hundred processes starting in one instant spend
                // the machine's cores on starting, not on the coordinator they are joining.
                try await Task.sleep(for: .milliseconds(20))
            }
            // Each agent takes the next free name of the token's prefix, in the order of use.
            let names = Set((1...count).map { "many-\($0)" })
            // One listing a poll, every few seconds: the CLI is a process, and the machine is busy.
            var clocks: [[String: Any]] = []
            let deadline = 120 + 3 * Double(count)
            while true {
                clocks = (try? fleet.json(["clock"], timeout: 30)) ?? clocks
                let ready = clocks.filter { $0["online"] as? Bool == true && $0["sync"] as? String == "locked" }
                if ready.count == count, Set(ready.compactMap { $0["name"] as? String }) == names { break }
                guard Date().timeIntervalSince(started) < deadline else {
                    let online = clocks.filter { $0["online"] as? Bool == true }.count
                    let waiting = clocks.filter { $0["sync"] as? String != "locked" }.compactMap { $0["name"] as? String }.sorted()
                    let exited = fleet.processes.filter { !$0.isRunning }.map(\.name)
                    Issue.record(
                        """
                        after \(Int(deadline)) s, \(clocks.count) of \(count) nodes registered, \(online) online, \(ready.count) online and locked; \
                        not locked: \(waiting.prefix(20)); exited: \(exited.prefix(20))
                        \(fleet.fleet.children.first?.log.suffix(3000) ?? "")
                        """)
                    return
                }
                try await Task.sleep(for: .seconds(2))
            }
            let ready = Date().timeIntervalSince(started)
            // Joining is a burst (enrollments, HELLOs, consent pushes, clocks probing twice as
            // often until locked a while): the listings are timed once it has passed, as the
            // benchmark times them (capfleet-bench fleet).
            try await Task.sleep(for: .seconds(min(10, Double(count) / 20)))

            let nodesStart = Date()
            let nodes = try fleet.json(["nodes"], timeout: 30)
            let nodesSeconds = Date().timeIntervalSince(nodesStart)
            let devicesStart = Date()
            let devices = try fleet.json(["devices"], timeout: 30)
            let devicesSeconds = Date().timeIntervalSince(devicesStart)
            print(
                String(
                    format:
                        "many agents: %d agents registered, online and clock-locked %.1f s after the first started; then capfleet nodes --json took %.0f ms, capfleet devices --json (with every camera's formats) %.0f ms, each the whole command, a process of its own",
                    count, ready, nodesSeconds * 1000, devicesSeconds * 1000))

            // Every node once, by the name its use of the token gave it, online, running this release.
            #expect(nodes.count == count)
            #expect(Set(nodes.compactMap { $0["name"] as? String }) == names)
            let nodeIDs = Set(nodes.compactMap { $0["node_id"] as? String })
            #expect(nodeIDs.count == count, "every node its own id")
            for node in nodes {
                let name = node["name"] as? String ?? "?"
                #expect(node["online"] as? Bool == true && node["revoked"] as? Bool == false, "\(name): \(node)")
                #expect(node["software_version"] as? String == WireDefaults.release, "\(name): \(node)")
                #expect(node["device_count"] as? Int == 1, "\(name): \(node)")
            }

            // Every camera once, on its own node, as its agent was told to run it, and black:
            // nobody has granted its consent.
            #expect(devices.count == count)
            #expect(Set(devices.compactMap { $0["device_id"] as? String }).count == count, "every camera its own id")
            var camerasPerNode: [String: Int] = [:]
            for device in devices {
                let id = device["device_id"] as? String ?? "?"
                let nodeID = device["node_id"] as? String ?? ""
                camerasPerNode[nodeID, default: 0] += 1
                // The synthetic camera's id says whose it is (CameraInventory): syn-NODE-1.
                #expect(id == "syn-\(nodeID.replacingOccurrences(of: "node-", with: "").prefix(8))-1", "\(id) on \(nodeID)")
                #expect(device["name"] as? String == "Synthetic camera 1" && device["kind"] as? String == "synthetic", "\(id): \(device)")
                #expect(device["online"] as? Bool == true && device["interruption"] == nil, "\(id): \(device)")
                let format = device["active_format"] as? [String: Any] ?? [:]
                #expect(
                    format["width"] as? Int == 160 && format["height"] as? Int == 120 && format["pixel_format"] as? String == "YUYV",
                    "\(id): \(format)")
                #expect(device["active_frame_rate"] as? Double == 1, "\(id): \(device)")
                #expect(
                    (device["formats"] as? [Any])?.count == device["format_count"] as? Int && (device["format_count"] as? Int ?? 0) > 1,
                    "\(id): every format listed")
                #expect(device["consent"] as? String == "not_determined" && device["real_frames"] as? Bool == false, "\(id): \(device)")
                #expect(device["recording"] as? Bool == false && device["live_flow"] as? Bool == false, "\(id): \(device)")
                #expect((device["live_consumers"] as? [Any])?.isEmpty == true && device["lease_holder"] == nil, "\(id): \(device)")
            }
            #expect(Set(camerasPerNode.keys) == nodeIDs && camerasPerNode.values.allSatisfy { $0 == 1 }, "one camera on every node")
            let exited = fleet.processes.filter { !$0.isRunning }.map(\.name)
            #expect(exited.isEmpty, "no process exited")
        }
    }
}
