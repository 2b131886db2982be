import FleetBus
import Foundation
import GRDB
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension IntegrationTests {
    /// The same commands on the synthetic camera, no VM needed: focus on its simulated
    /// lens, leases held by an operator session, and the opt-in drop recovery.
    @Suite struct SyntheticControlTests {
        @Test func focus_movesTheSimulatedLens_andAutoFocusLocksWhereItLanded() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("lens", fps: 30)
            try await fleet.waitUntil("the camera streams", seconds: 20) {
                try fleet.deviceStats().values.contains { ($0["frames_captured"] as? Int ?? 0) > 3 }
            }
            let device = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            let refused = try fleet.cli(["focus", device, "--lens", "0.25"])
            #expect(refused.status != 0 && refused.error.contains("capfleet lock"), "focus needs the lease: \(refused.error)")
            _ = try fleet.json(["lock", device])

            let locked = try fleet.jsonObject(["focus", device, "--lens", "0.25"])
            #expect(locked["mode"] as? String == "locked")
            try await fleet.waitUntil("the lens reaches 0.25", seconds: 10) {
                try Self.focus(of: device, in: fleet)?["lens_position"] as? Double == 0.25
            }
            // Autofocus on a point near the bottom of the frame: near subject, then locked there.
            _ = try fleet.jsonObject(["focus", device, "--mode", "auto", "--point", "0.5,0.9"])
            try await fleet.waitUntil("autofocus lands and locks", seconds: 10) {
                let focus = try Self.focus(of: device, in: fleet)
                return focus?["mode"] as? String == "locked" && abs((focus?["lens_position"] as? Double ?? 0) - 0.22) < 0.001
            }
            let outOfRange = try fleet.cli(["focus", device, "--lens", "1.5"])
            #expect(outOfRange.status != 0 && outOfRange.error.contains("must be 0...1"), "\(outOfRange.error)")
        }

        @Test func heldLease_isReleasedWhenItsSessionEnds_orItsHolderIsKilled() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("held")
            try await fleet.waitUntil("the device registers", seconds: 20) { try !fleet.json(["devices"]).isEmpty }
            let device = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)

            // Ctrl-C (SIGINT/SIGTERM): the session ends and the lease goes at once.
            let polite = try Self.holdLease(on: device, fleet: fleet, user: "ana")
            try await fleet.waitUntil("ana holds the lease", seconds: 10) { try Self.holder(of: device, in: fleet) == "ana" }
            polite.terminate()
            polite.waitUntilExit()
            #expect(polite.terminationStatus == 0)
            #expect(try Self.holder(of: device, in: fleet) == nil, "the lease is gone as soon as the session ends")

            // SIGKILL: no goodbye; the coordinator notices the silence and releases it.
            let killed = try Self.holdLease(on: device, fleet: fleet, user: "bo")
            try await fleet.waitUntil("bo holds the lease", seconds: 10) { try Self.holder(of: device, in: fleet) == "bo" }
            kill(killed.processIdentifier, SIGKILL)
            killed.waitUntilExit()
            let taken = try fleet.cli(["lock", device], user: "ana")
            #expect(taken.status != 0 && taken.error.contains("bo"), "still bo's until the session times out: \(taken.error)")
            let waited = try await fleet.waitUntil("bo's lease is released", seconds: 20) { try Self.holder(of: device, in: fleet) == nil }
            #expect(waited >= 5, "released by the session timeout (10 s), not at once: \(waited) s")
            let audit = try await DatabaseQueue(path: fleet.databasePath).read { db in
                try String.fetchAll(
                    db, sql: "SELECT action FROM auditLog WHERE target = ? AND actor = 'coordinator' ORDER BY id", arguments: [device])
            }
            #expect(audit == ["session.end", "session.lost"], "\(audit)")
        }

        @Test func dropRecovery_lowersTheRateWhileLateDropsPersist_andRestoresIt_announcingEachStep() async throws {
            let fleet = try FleetHarness()
            // A long liveness, so that a coordinator paused for seconds does not count the node offline.
            let coordinator = try fleet.startCoordinator(environment: ["CAPFLEET_HEARTBEAT_LIVENESS": "15"])
            try fleet.startAgent("busy", fps: 60)
            try await fleet.waitUntil("the camera streams", seconds: 20) {
                try fleet.deviceStats().values.contains { ($0["frames_captured"] as? Int ?? 0) > 10 }
            }
            let device = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            _ = try fleet.json(["lock", device])
            let policy = try fleet.json(["policy", device, "--drop-recovery", "on", "--min-fps", "15", "--quiet-seconds", "2"])
            #expect((policy.first?["drop_recovery"] as? [String: Any])?["enabled"] as? Bool == true)

            // Someone watches, so the frames are on their way to the coordinator.
            let viewerContext = ZMQContext()
            let viewer = try fleet.wantFrames(of: [device], context: viewerContext)
            defer { viewer.close() }
            try await fleet.waitUntil("the camera's frames flow", seconds: 10) { try fleet.deviceStats()[device]?["live_flow"] as? Bool == true }
            // A coordinator that stops reading: the agent's send queue overflows, frames are late.
            kill(coordinator.process.processIdentifier, SIGSTOP)
            try await Task.sleep(for: .seconds(4))
            kill(coordinator.process.processIdentifier, SIGCONT)

            try await fleet.waitUntil("the lowered rate is announced", seconds: 15) {
                try Self.policyActions(fleet).contains { $0.contains("lowered the frame rate") }
            }
            let lowered = try #require(try Self.policyActions(fleet).first { $0.contains("lowered") })
            #expect(lowered.contains("to 45 fps"), "one step down from 60 is 45: \(lowered)")
            try await fleet.waitUntil("the operator's rate comes back", seconds: 20) {
                try Self.policyActions(fleet).contains { $0.contains("restored the frame rate to 60 fps") }
                    && (try fleet.json(["devices"]).first?["active_frame_rate"] as? Double) == 60
            }
        }

        static func focus(of device: String, in fleet: FleetHarness) throws -> [String: Any]? {
            (try fleet.jsonObject(["device", device])["device"] as? [String: Any])?["focus"] as? [String: Any]
        }

        static func holder(of device: String, in fleet: FleetHarness) throws -> String? {
            try fleet.json(["devices"]).first { $0["device_id"] as? String == device }?["lease_holder"] as? String
        }

        static func policyActions(_ fleet: FleetHarness) throws -> [String] {
            try DatabaseQueue(path: fleet.databasePath).read { db in
                try String.fetchAll(db, sql: "SELECT detail FROM auditLog WHERE action = 'policy.acted' ORDER BY id")
            }
        }

        /// `capfleet lock DEVICE --hold` as a running process.
        static func holdLease(on device: String, fleet: FleetHarness, user: String) throws -> Process {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: FleetHarness.binary)
            process.arguments = [
                "lock", device, "--hold", "--coordinator", "127.0.0.1:\(fleet.operatorPort)",
                "--credential", try fleet.credential(for: user),
            ]
            process.environment = ProcessInfo.processInfo.environment.merging(["USER": user]) { $1 }
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            return process
        }
    }
}
