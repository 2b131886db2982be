import Foundation
import Testing

extension SecondLaneIntegrationTests {
    /// `capfleet backup` against a running coordinator, `capfleet restore` into a stopped one.
    @Suite(.serialized) struct BackupTests {
        /// A backup taken while a take records restores to a coordinator that lists the same
        /// takes, nodes and operators; the coordinator goes on recording while it is taken.
        @Test func backupDuringATake_restoresToACoordinatorListingTheSameTakes() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let devices = try await RecordingTests.devices(in: fleet, agents: ["k1", "k2"], fps: 15)
            let earlier = try RecordingTests.start([devices[0]], in: fleet)
            #expect(try fleet.cli(["record", "stop", earlier], timeout: 20).status == 0)
            let running = try RecordingTests.start(devices, in: fleet)
            try await Task.sleep(for: .seconds(2))

            let backup = fleet.directory + "/fleet-backup.sqlite"
            let taken = try fleet.cli(["backup", backup, "--json"], timeout: 30)
            #expect(taken.status == 0, "\(taken.output)\(taken.error)")
            let summary = try #require(try JSONSerialization.jsonObject(with: Data(taken.output.utf8)) as? [String: Any])
            #expect(summary["takes"] as? String == "2", "\(summary)")
            print("backup: \(summary["bytes"] ?? "?") bytes, schema v\(summary["schema_version"] ?? "?") during a running take")

            // The take went on while the backup was taken.
            try await Task.sleep(for: .seconds(1))
            #expect(try fleet.cli(["record", "stop", running], timeout: 20).status == 0)
            let stopped = try RecordingTests.show(running, in: fleet)
            for part in try #require(stopped["devices"] as? [[String: Any]]) {
                #expect(try RecordingTests.lostByTheFleet(part, in: fleet) == 0, "nothing dropped while the backup was taken: \(part)")
            }
            let original = try fleet.json(["recordings", "list"]).compactMap { $0["id"] as? String }.sorted()
            let originalNodes = try fleet.nodes().compactMap { $0["name"] as? String }.sorted()

            // Restoring under the running coordinator is refused, and so is a second coordinator.
            let refused = try fleet.run(["restore", backup, "--data", fleet.coordinatorDataDirectory, "--replace"])
            #expect(refused.status != 0 && refused.error.contains("a coordinator is running"), "\(refused.error)")
            let second = try fleet.startCoordinator()
            try await fleet.waitUntil("the second coordinator gives up", seconds: 10) { !second.isRunning }
            #expect(second.log.contains("a coordinator is running"), "\(second.log)")

            // A new host: the backup, and the coordinator's keys copied once.
            let restored = try FleetHarness()
            let put = try restored.run(["restore", backup, "--data", restored.coordinatorDataDirectory])
            #expect(put.status == 0, "\(put.error)")
            #expect(put.output.contains("2 take(s)"), "\(put.output)")
            try FileManager.default.copyItem(atPath: fleet.coordinatorDataDirectory + "/keys", toPath: restored.coordinatorDataDirectory + "/keys")
            try restored.startCoordinator()
            try await restored.waitUntil("the restored coordinator answers", seconds: 15) { (try? restored.cli(["nodes"]).status) == 0 }
            let listed = try restored.json(["recordings", "list"])
            #expect(listed.compactMap { $0["id"] as? String }.sorted() == original, "\(listed)")
            let finished = try #require(listed.first { $0["id"] as? String == earlier })
            #expect(finished["state"] as? String == "stopped", "\(finished)")
            #expect(listed.contains { $0["id"] as? String == running }, "the take running at backup time is listed")
            #expect(try restored.nodes().compactMap { $0["name"] as? String }.sorted() == originalNodes)
            #expect(try restored.coordinatorKey() == fleet.coordinatorKey())

            // Over an existing database only with --replace, which keeps the old one aside.
            let again = try restored.run(["restore", backup, "--data", fleet.directory + "/elsewhere"])
            #expect(again.status == 0, "\(again.error)")
            let twice = try restored.run(["restore", backup, "--data", fleet.directory + "/elsewhere"])
            #expect(twice.status != 0 && twice.error.contains("--replace"), "\(twice.error)")
            let replaced = try restored.run(["restore", backup, "--data", fleet.directory + "/elsewhere", "--replace"])
            #expect(replaced.status == 0 && replaced.output.contains("replaced-"), "\(replaced.output)\(replaced.error)")

            // Not a fleet database: refused with the reason.
            let junk = fleet.directory + "/junk.sqlite"
            try Data("not a database at all".utf8).write(to: URL(fileURLWithPath: junk))
            let bad = try restored.run(["restore", junk, "--data", fleet.directory + "/third"])
            #expect(bad.status != 0 && !bad.error.isEmpty, "\(bad.error)")
        }
    }
}
