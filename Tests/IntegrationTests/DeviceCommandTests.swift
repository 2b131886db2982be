import Foundation
import GRDB
import Testing

extension IntegrationTests {
    /// Operators steer devices through the coordinator: every change is a command the agent
    /// answers, is visible in listings and in the frames themselves, and is audited.
    @Suite struct DeviceCommandTests {
        @Test func formatPresetAndFrameRate_changeTheStream_andAreAudited() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("rig")
            try await fleet.waitUntil("the camera streams", seconds: 20) {
                try fleet.deviceStats().values.contains { ($0["frames_captured"] as? Int ?? 0) > 3 }
            }
            let deviceID = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)

            // Changes need the configuration lease.
            let unlocked = try fleet.cli(["preset", deviceID, "low"])
            #expect(unlocked.status != 0 && unlocked.error.contains("capfleet lock"), "\(unlocked.error)")
            let locked = try fleet.json(["lock", deviceID])
            #expect(locked.first?["lease_holder"] as? String == "ana")

            // A preset: the frames that arrive afterwards have the new layout.
            let preset = try fleet.json(["preset", deviceID, "1280x720"])
            let active = try #require(preset.first?["active_format"] as? [String: Any])
            #expect(active["width"] as? Int == 1280 && active["height"] as? Int == 720 && active["pixel_format"] as? String == "NV12")
            try await fleet.waitUntil("a 1280x720 NV12 frame arrives", seconds: 10) {
                let frame = try fleet.jsonObject(["snapshot", deviceID])
                return frame["width"] as? Int == 1280 && frame["pixel_format"] as? String == "NV12"
                    && frame["payload_size"] as? Int == 1280 * 720 * 3 / 2
            }

            // Best match and frame rate.
            let matched = try fleet.json(["format", deviceID, "--size", "1920x1080", "--pixel-format", "yuyv"])
            #expect((matched.first?["active_format"] as? [String: Any])?["pixel_format"] as? String == "YUYV")
            let rate = try fleet.json(["frame-rate", deviceID, "24"])
            #expect(rate.first?["active_frame_rate"] as? Double == 24)
            let reset = try fleet.json(["frame-rate", deviceID, "default"])
            #expect(reset.first?["active_frame_rate"] as? Double == 30)

            // Requests the device cannot meet are refused with what it supports.
            let tooFast = try fleet.cli(["frame-rate", deviceID, "90"])
            #expect(tooFast.status != 0)
            #expect(tooFast.error.contains("1-30"), "the refusal lists the active format's ranges: \(tooFast.error)")
            let noMJPG = try fleet.cli(["format", deviceID, "--pixel-format", "MJPG"])
            #expect(noMJPG.status != 0 && noMJPG.error.contains("3840x2160 NV12"), "the refusal lists the formats: \(noMJPG.error)")
            let badPreset = try fleet.cli(["preset", deviceID, "cinema"])
            #expect(badPreset.status != 0 && badPreset.error.contains("medium"))
            let noSuchSize = try fleet.cli(["format", deviceID, "--size", "99999x1"])
            #expect(
                noSuchSize.status != 0 && noSuchSize.error.contains("99999x1")
                    && noSuchSize.error.contains("1280x720 (YUYV 1-30fps, NV12 1-60fps, Y12 1-30fps)"),
                "a size no format has is refused with the sizes there are: \(noSuchSize.error)")
            let yuyvTooFast = try fleet.cli(["format", deviceID, "--size", "1280x720", "--pixel-format", "yuyv", "--fps", "60"])
            #expect(yuyvTooFast.status != 0 && yuyvTooFast.error.contains("1280x720 YUYV 1-30fps"), "\(yuyvTooFast.error)")

            // A rate asked with the format is the rate the device runs at, not the one it had.
            let sixty = try fleet.json(["format", deviceID, "--size", "1280x720", "--fps", "60"])
            #expect((sixty.first?["active_format"] as? [String: Any])?["pixel_format"] as? String == "NV12")
            #expect(sixty.first?["active_frame_rate"] as? Double == 60)

            // The coordinator remembers the device's state and who changed it.
            let devices = try fleet.json(["devices"])
            #expect(devices.first?["active_frame_rate"] as? Double == 60)
            let audit = try Self.audit(fleet.databasePath)
            #expect(audit.filter { $0 == "device.format/ok" }.count == 3)
            #expect(audit.filter { $0 == "device.frame_rate/ok" }.count == 3)
            #expect(audit.filter { $0.hasSuffix("/refused") }.count == 5, "four impossible requests and one without the lease: \(audit)")
        }

        @Test func commandToAnOfflineNode_isRefusedAsUnavailable() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("gone")
            try await fleet.waitUntil("the agent is online", seconds: 20) { try fleet.onlineNodeIDs().count == 1 }
            let deviceID = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            _ = try fleet.json(["lock", deviceID])
            agent.kill()
            try await fleet.waitUntil("the agent is offline", seconds: 10) { try fleet.onlineNodeIDs().isEmpty }
            let result = try fleet.cli(["preset", deviceID, "low"])
            #expect(result.status != 0)
            #expect(result.error.contains("offline"))
        }

        static func audit(_ path: String) throws -> [String] {
            try DatabaseQueue(path: path).read { db in
                try String.fetchAll(db, sql: "SELECT action || '/' || outcome FROM auditLog ORDER BY id")
            }
        }
    }

    @Suite struct ZoomCommandTests {
        /// A coordinator and an agent with one synthetic camera at 30 fps, streaming, locked by ana.
        static func lockedStreamingCamera(in fleet: FleetHarness, agent: String) async throws -> String {
            try fleet.startCoordinator()
            try fleet.startAgent(agent, fps: 30)
            try await fleet.waitUntil("the camera streams", seconds: 20) {
                try fleet.deviceStats().values.contains { ($0["frames_captured"] as? Int ?? 0) > 3 }
            }
            let deviceID = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            _ = try fleet.json(["lock", deviceID])
            return deviceID
        }

        @Test func zoom_setRampAndCancel_showInTheFramesThemselves() async throws {
            let fleet = try FleetHarness()
            let deviceID = try await Self.lockedStreamingCamera(in: fleet, agent: "zoomer")
            func frameZoom() throws -> (factor: Double, upscaled: Bool) {
                let frame = try fleet.jsonObject(["snapshot", deviceID])
                return (frame["zoom_factor"] as? Double ?? 0, frame["upscaled"] as? Bool ?? false)
            }

            let set = try fleet.jsonObject(["zoom", deviceID, "2"])
            #expect(set["zoom_factor"] as? Double == 2 && set["zoom_method"] as? String == "deviceControl")
            try await fleet.waitUntil("frames carry 2x", seconds: 5) { try frameZoom().factor == 2 }
            #expect(try frameZoom().upscaled == false)

            // 640x480 on a 3840-wide sensor upscales past 6x.
            _ = try fleet.jsonObject(["zoom", deviceID, "7"])
            try await fleet.waitUntil("frames carry 7x, flagged as upscaled", seconds: 5) { try frameZoom() == (7, true) }

            _ = try fleet.jsonObject(["zoom", deviceID, "1"])
            // A slow ramp (doubling every 4 s: 1x to 8x takes 12 s), so a busy machine still
            // catches it mid-way.
            _ = try fleet.jsonObject(["zoom", deviceID, "8", "--ramp", "0.25"])
            try await Task.sleep(for: .milliseconds(700))
            let during = try frameZoom().factor
            #expect(during > 1 && during < 8, "mid-ramp the factor is between: \(during)")
            _ = try fleet.jsonObject(["zoom", deviceID, "--cancel"])
            try await Task.sleep(for: .milliseconds(500))
            let stopped = try frameZoom().factor
            try await Task.sleep(for: .milliseconds(300))
            #expect(try frameZoom().factor == stopped, "after cancel the zoom holds")
            #expect(stopped < 8 && stopped >= during)

            let refused = try fleet.cli(["zoom", deviceID, "9"])
            #expect(refused.status != 0 && refused.error.contains("1x-8x"), "\(refused.error)")
        }

        /// A format change during a ramp does what AVCaptureDevice does when its activeFormat
        /// changes: the ramp is cancelled where it is, the zoom holds there in every later
        /// frame and in the listing, and a zoom_changed event says so.
        @Test func formatChangeMidRamp_cancelsTheRamp_holdsTheZoom_andSaysSo() async throws {
            let fleet = try FleetHarness()
            let deviceID = try await Self.lockedStreamingCamera(in: fleet, agent: "reformat")
            func frameZoom() throws -> Double { try fleet.jsonObject(["snapshot", deviceID])["zoom_factor"] as? Double ?? 0 }

            // 1x to 4x at a quarter of an octave a second takes 8 s: the change lands mid-way.
            _ = try fleet.jsonObject(["zoom", deviceID, "4", "--ramp", "0.25"])
            try await Task.sleep(for: .seconds(1))
            let changed = try fleet.cli(["format", deviceID, "--size", "1280x720", "--pixel-format", "nv12"])
            #expect(changed.status == 0, "\(changed.error)")
            var event: [String: Any]?
            try await fleet.waitUntil("a zoom_changed event", seconds: 10) {
                event = try SecondLaneIntegrationTests.AlertsTests.events(fleet).first {
                    $0["kind"] as? String == "zoom_changed" && $0["device_id"] as? String == deviceID
                }
                return event != nil
            }
            let message = event?["message"] as? String ?? ""
            #expect(message.contains("cancelled the zoom ramp to 4x"), "\(message)")

            try await fleet.waitUntil("frames of the new format", seconds: 10) {
                try fleet.jsonObject(["snapshot", deviceID])["width"] as? Int == 1280
            }
            let held = try frameZoom()
            #expect(held > 1 && held < 4, "frozen mid-way, not at the target: \(held)")
            try await Task.sleep(for: .seconds(1.5))
            #expect(try frameZoom() == held, "the zoom holds in later frames")
            let listed = try #require(try fleet.json(["devices"]).first?["zoom_factor"] as? Double)
            #expect(abs(listed - held) < 1e-6, "the listing says the same: \(listed)")
            #expect(message.contains("the zoom holds at"), "\(message)")
        }
    }

    @Suite struct ConfigurationLeaseTests {
        @Test func lease_isExclusive_namesItsHolder_survivesARestart_andExpires() async throws {
            let fleet = try FleetHarness()
            let coordinator = try fleet.startCoordinator()
            try fleet.startAgent("shared")
            try await fleet.waitUntil("the agent is online", seconds: 20) { try fleet.onlineNodeIDs().count == 1 }
            let deviceID = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)

            _ = try fleet.json(["lock", deviceID, "--for", "10"], user: "ana")
            let stolen = try fleet.cli(["lock", deviceID], user: "bo")
            #expect(stolen.status != 0 && stolen.error.contains("ana"), "the refusal names the holder: \(stolen.error)")
            let meddling = try fleet.cli(["zoom", deviceID, "2"], user: "bo")
            #expect(meddling.status != 0 && meddling.error.contains("locked for configuration by ana"), "\(meddling.error)")
            #expect(try fleet.cli(["unlock", deviceID], user: "bo").status != 0, "only the holder unlocks")

            // Leases are kept in SQLite: a restarted coordinator still knows the holder.
            coordinator.kill()
            try fleet.startCoordinator()
            try await fleet.waitUntil("the agent is back", seconds: 20) { try fleet.onlineNodeIDs().count == 1 }
            #expect(try fleet.json(["devices"]).first?["lease_holder"] as? String == "ana")

            // It expires by itself, and then someone else may take it.
            try await fleet.waitUntil("the lease expires", seconds: 20) { try fleet.json(["devices"]).first?["lease_holder"] == nil }
            #expect(try fleet.json(["lock", deviceID], user: "bo").first?["lease_holder"] as? String == "bo")
            #expect(try fleet.cli(["unlock", deviceID], user: "bo").status == 0)
            let audit = try DeviceCommandTests.audit(fleet.databasePath)
            #expect(audit.contains("lease.expire/ok") && audit.contains("lease.unlock/ok") && audit.contains("lease.lock/refused"), "\(audit)")
        }
    }
}
