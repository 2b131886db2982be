import Foundation
import Testing

extension SecondLaneIntegrationTests {
    /// An operator removed from the fleet leaves no lock behind: a timed lease of theirs would
    /// otherwise keep a device locked, by nobody, until it ran out.
    @Suite struct OperatorRemovalTests {
        @Test func removingAnOperator_releasesTheLeasesTheyHeld() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("cams")
            try await fleet.waitUntil("the device is listed", seconds: 20) { try !fleet.json(["devices"]).isEmpty }
            let device = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            #expect(try fleet.cli(["lock", device, "--for", "3600"], user: "bo").status == 0)
            let refused = try fleet.cli(["lock", device])
            #expect(refused.status != 0 && refused.error.contains("bo"), "ana is refused while bo holds it: \(refused.error)")

            #expect(try fleet.cli(["operator", "remove", "bo"]).status == 0)
            let locked = try fleet.cli(["lock", device])
            #expect(locked.status == 0, "bo's lease went with bo: \(locked.error)")
            let events = try fleet.cli(["events"]).output
            #expect(events.contains("lease of bo released: operator bo was removed"), "\(events.suffix(600))")
        }
    }
}
