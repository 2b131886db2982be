import Foundation
import GRDB
import Testing

extension SecondLaneIntegrationTests {
    /// Real processes, real sockets, real SQLite: the fleet as an operator runs it.
    @Suite struct FleetLifecycleTests {
        @Test func twoAgentsRegister_withFullFormatLists_andFramesFlow() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("cam-host-a")
            try fleet.startAgent("cam-host-b", synthetic: 2)
            try await fleet.waitUntil("both agents are online", seconds: 20) { try fleet.onlineNodeIDs().count == 2 }

            let nodes = try fleet.nodes()
            #expect(Set(nodes.compactMap { $0["name"] as? String }) == ["cam-host-a", "cam-host-b"])
            #expect(nodes.allSatisfy { ($0["software_version"] as? String)?.isEmpty == false })

            let devices = try fleet.json(["devices"])
            #expect(devices.count == 3)
            for device in devices {
                let formats = try #require(device["formats"] as? [[String: Any]])
                #expect(formats.count == 17, "the synthetic camera lists its whole format list, stills last")
                let labels = Set(
                    formats.map { "\($0["width"]!)x\($0["height"]!) \($0["pixel_format"]!)\(($0["binned"] as? Bool) == true ? " binned" : "")" })
                #expect(
                    labels.isSuperset(of: [
                        "640x480 YUYV", "1280x720 NV12", "1920x1080 YUYV", "3840x2160 NV12", "1920x1080 NV12 binned", "320x240 YUYV", "160x120 YUYV",
                    ]))
                let binned = try #require(formats.first { ($0["binned"] as? Bool) == true })
                let rates = try #require(binned["frame_rate_ranges"] as? [[String: Any]])
                #expect(rates.first?["max_fps"] as? Double == 120)
                #expect(formats.allSatisfy { ($0["field_of_view_degrees"] as? Double) == 78 && ($0["max_zoom_factor"] as? Double) == 8 })
            }
            let deviceID = try #require(devices.first?["device_id"] as? String)
            let formats = try fleet.json(["formats", deviceID])
            #expect(formats.count == 17)

            // Frames flow: the coordinator counts frames and bytes per device.
            try await fleet.waitUntil("every device has delivered 20 frames", seconds: 20) {
                try fleet.deviceStats().values.filter { ($0["frames_captured"] as? Int ?? 0) >= 20 }.count == 3
            }
            let stats = try fleet.deviceStats()
            for (_, device) in stats {
                let frames = try #require(device["frames_captured"] as? Int)
                #expect(device["bytes_captured"] as? Int == frames * 640 * 480 * 2)
                #expect(device["streaming"] as? Bool == true)
            }

            // The frame numbers burned into the pixels increase (real pixels: consent granted).
            try fleet.grantConsent(deviceID)
            let first = try fleet.jsonObject(["snapshot", deviceID])
            try await Task.sleep(for: .milliseconds(600))
            let second = try fleet.jsonObject(["snapshot", deviceID])
            let a = try #require(first["stamped_frame_number"] as? Int)
            let b = try #require(second["stamped_frame_number"] as? Int)
            #expect(b > a)
            #expect(first["sequence"] as? Int == a, "the stamped number is the source's sequence number")
        }

        @Test func killedAgent_goesOfflineWithinFiveSeconds_andReturnsWithTheSameIdentity() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("doomed")
            try fleet.startAgent("survivor")
            try await fleet.waitUntil("both agents are online", seconds: 20) { try fleet.onlineNodeIDs().count == 2 }
            let doomed = try #require(try fleet.nodes().first { $0["name"] as? String == "doomed" })
            let nodeID = try #require(doomed["node_id"] as? String)
            let deviceIDs = Set(try fleet.json(["devices", "--node", nodeID]).compactMap { $0["device_id"] as? String })

            agent.kill()
            let took = try await fleet.waitUntil("the killed agent is offline", seconds: 5) { try !fleet.onlineNodeIDs().contains(nodeID) }
            #expect(took <= 5)
            #expect(try fleet.onlineNodeIDs().count == 1, "the other agent stays online")

            try fleet.startAgent("doomed")
            try await fleet.waitUntil("the restarted agent is online", seconds: 20) { try fleet.onlineNodeIDs().contains(nodeID) }
            let nodes = try fleet.nodes()
            #expect(nodes.count == 2, "the restarted agent is the same node, not a new one")
            #expect(Set(try fleet.json(["devices", "--node", nodeID]).compactMap { $0["device_id"] as? String }) == deviceIDs)
        }

        @Test func killedCoordinator_restarts_agentsReregister_andNothingIsLostOrDuplicated() async throws {
            let fleet = try FleetHarness()
            let coordinator = try fleet.startCoordinator()
            try fleet.startAgent("alpha")
            try fleet.startAgent("beta", synthetic: 2)
            try await fleet.waitUntil("both agents are online", seconds: 20) { try fleet.onlineNodeIDs().count == 2 }
            try await fleet.waitUntil("frames have been counted and stored", seconds: 20) {
                // All three devices, each with 30 frames (an empty answer proves nothing).
                try fleet.deviceStats().values.filter { ($0["frames_captured"] as? Int ?? 0) >= 30 }.count == 3
            }
            try await Task.sleep(for: .seconds(2.5))  // at least one counter flush
            let before = try Self.rowCounts(fleet.databasePath)
            let framesBefore = try Self.storedFrames(fleet.databasePath)

            coordinator.kill()
            try fleet.startCoordinator()
            try await fleet.waitUntil("both agents re-registered by themselves", seconds: 25) { try fleet.onlineNodeIDs().count == 2 }

            let after = try Self.rowCounts(fleet.databasePath)
            #expect(after.nodes == before.nodes)
            #expect(after.devices == before.devices)
            #expect(after.formats == before.formats)
            #expect(after.devices == 3 && after.formats == 3 * 17)
            // Counters continue from what was stored instead of starting over.
            try await fleet.waitUntil("frames flow again", seconds: 15) {
                try fleet.deviceStats().values.filter { ($0["frames_per_second"] as? Double ?? 0) > 5 }.count == 3
            }
            for (deviceID, stored) in framesBefore {
                let now = try #require(try fleet.deviceStats()[deviceID]?["frames_captured"] as? Int)
                #expect(now >= stored, "device \(deviceID) counted \(now) frames after the restart, \(stored) before")
            }
            // The connection history shows the coordinator's restart: offline, then registered again.
            let history = try Self.connectionHistory(fleet.databasePath)
            #expect(history.filter { $0 == "registered" }.count >= 4)
            #expect(history.contains("offline"))
        }

        static func rowCounts(_ path: String) throws -> (nodes: Int, devices: Int, formats: Int) {
            try DatabaseQueue(path: path).read { db in
                (
                    try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM node")!, try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM device")!,
                    try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM format")!
                )
            }
        }

        static func connectionHistory(_ path: String) throws -> [String] {
            try DatabaseQueue(path: path).read { db in try String.fetchAll(db, sql: "SELECT kind FROM connectionEvent ORDER BY id") }
        }

        static func storedFrames(_ path: String) throws -> [String: Int] {
            try DatabaseQueue(path: path).read { db in
                // What each device captured, as stored: the earlier agent processes' and the current one's.
                Dictionary(
                    uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT deviceId, earlierFrames + runFrames AS frames FROM deviceCaptureCount")
                        .map { ($0["deviceId"] as String, $0["frames"] as Int) })
            }
        }
    }

    @Suite struct GracefulShutdownTests {
        @Test func sigterm_stopsTheCoordinatorCleanly_andStoresItsCounters() async throws {
            let fleet = try FleetHarness()
            let coordinator = try fleet.startCoordinator()
            let agent = try fleet.startAgent("steady")
            try await fleet.waitUntil("frames are counted", seconds: 20) {
                try fleet.deviceStats().values.contains { ($0["frames_captured"] as? Int ?? 0) >= 10 }
            }
            _ = agent.stop()
            #expect(agent.process.terminationStatus == 0, "the agent exits cleanly on SIGTERM:\n\(agent.log.suffix(2000))")
            let counted = try #require(try fleet.deviceStats().values.first?["frames_captured"] as? Int)
            #expect(coordinator.stop() == 0, "the coordinator exits cleanly on SIGTERM:\n\(coordinator.log.suffix(2000))")
            let stored = try #require(try FleetLifecycleTests.storedFrames(fleet.databasePath).values.first)
            #expect(stored >= counted, "the final flush stored every counted frame: \(stored) stored, \(counted) seen before")
            #expect(coordinator.log.contains("coordinator stopped"))
        }
    }
}
