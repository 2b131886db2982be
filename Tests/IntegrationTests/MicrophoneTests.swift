import Foundation
import Testing

extension SecondLaneIntegrationTests {
    /// The synthetic microphone (proto-docs/microphones.md): a device of its own kind whose
    /// per-channel levels reach `capfleet watch` once a second, silence until its consent is
    /// granted, then the tone's RMS and the click's peak; a take will not take it yet.
    @Suite struct MicrophoneTests {
        static func levels(_ fleet: FleetHarness, _ device: String) throws -> [[String: Any]]? {
            try fleet.deviceStats()[device]?["audio_levels"] as? [[String: Any]]
        }

        @Test func aSyntheticMicrophone_isSilentWithoutConsent_andMetersItsToneAndClickOnceGranted() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("studio", extra: ["--synthetic-microphones", "1"])
            try await fleet.waitUntil("the clock locks", seconds: 30) { agent.log.contains("clock.state=locked") }
            let devices = try fleet.json(["devices"])
            let microphone = try #require(
                devices.first { $0["kind"] as? String == "syntheticMicrophone" }?["device_id"] as? String, "\(devices)")
            #expect(microphone.hasPrefix("synmic-"))
            let camera = try #require(devices.first { $0["kind"] as? String == "synthetic" }?["device_id"] as? String)

            // Without consent: silence, metered.
            try await fleet.waitUntil("levels are reported", seconds: 10) { try Self.levels(fleet, microphone)?.count == 2 }
            for level in try #require(try Self.levels(fleet, microphone)) {
                #expect(level["peak_dbfs"] as? Double == -120 && level["rms_dbfs"] as? Double == -120, "silence: \(level)")
            }

            try fleet.grantConsent(microphone)
            var heard: [[String: Any]] = []
            try await fleet.waitUntil("the tone and the click are metered", seconds: 10) {
                heard = try Self.levels(fleet, microphone) ?? []
                return heard.count == 2 && heard.allSatisfy { ($0["peak_dbfs"] as? Double ?? -120) > -3 }
            }
            for level in heard {
                let rms = try #require(level["rms_dbfs"] as? Double)
                let peak = try #require(level["peak_dbfs"] as? Double)
                #expect(abs(peak - -1) < 0.2, "the click's peak: \(level)")
                #expect(rms > -24 && rms < -21, "the tone's RMS (with a click a second): \(level)")
                #expect(level["clipped"] as? Int == 0)
            }
            let frames = try #require(try fleet.deviceStats()[microphone]?["audio_frames_captured"] as? Int)
            #expect(frames > 48_000, "48 kHz for seconds: \(frames)")
            #expect(try fleet.cli(["watch", "--count", "1"]).output.contains("peak/rms dBFS"))

            // Only consent; and no take of it yet.
            #expect(try fleet.cli(["lock", microphone]).status == 0)
            let focus = try fleet.cli(["focus", microphone, "--mode", "auto"])
            #expect(focus.status != 0 && focus.error.contains("is a microphone"), "\(focus.error)")
            try fleet.grantConsent(camera)
            let take = try fleet.cli(["record", "start", camera, microphone])
            #expect(take.status != 0 && take.error.contains("do not record sound yet"), "\(take.error)")

            // Revoked: silence again from the next second on.
            #expect(try fleet.cli(["consent", "revoke", microphone, "--reason", "rehearsal over"]).status == 0)
            try await fleet.waitUntil("the microphone is silent again", seconds: 10) {
                try Self.levels(fleet, microphone)?.allSatisfy { $0["peak_dbfs"] as? Double == -120 } == true
            }
        }
    }
}
