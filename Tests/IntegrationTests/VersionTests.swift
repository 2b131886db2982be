import FleetProtocol
import Foundation
import Testing

extension SecondLaneIntegrationTests {
    /// One version everywhere (WireDefaults.release): what `capfleet --version` prints (and so
    /// the Debian package's version, which scripts/build-deb.sh reads from the binary), what a
    /// running agent reports in its HELLO, and what `capfleet nodes` shows for it.
    @Suite struct VersionTests {
        @Test func theBinary_theAgentsHello_andTheNodeListing_sayOneVersion() async throws {
            let fleet = try FleetHarness()
            let printed = try fleet.run(["--version"])
            #expect(printed.status == 0, "\(printed.error)")
            let binaryVersion = try #require(printed.output.split(separator: " ").first.map(String.init))
            #expect(binaryVersion == WireDefaults.release)

            try fleet.startCoordinator()
            try fleet.startAgent("versioned")
            try await fleet.waitUntil("the agent registers", seconds: 20) { try fleet.onlineNodeIDs().count == 1 }
            let node = try #require(try fleet.nodes().first)
            #expect(node["software_version"] as? String == binaryVersion, "\(node)")

            let table = try fleet.cli(["nodes"])
            #expect(table.status == 0 && table.output.contains(binaryVersion), "\(table.output)")
        }
    }
}
