import FleetCoordinator
import FleetStore
import Foundation
import Testing

/// `--data` on the coordinator's host names a coordinator's data directory, or is refused.
@Suite final class LocalAdministrationTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-local-\(UUID().uuidString.prefix(8))").path

    init() throws { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
    deinit { try? FileManager.default.removeItem(atPath: directory) }

    func makeFleet(in folder: String) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        _ = try FleetDatabase(path: folder + "/fleet.sqlite")
    }

    @Test func aFolderWithAFleetDatabase_isTheDataDirectory() throws {
        try makeFleet(in: directory + "/coord")
        #expect(try LocalAdministration.dataDirectory(named: directory + "/coord", newFleet: false) == directory + "/coord")
    }

    /// `capfleet dev --data DIR` keeps its coordinator's data in DIR/coordinator: either name works.
    @Test func aDevFleetsFolder_namesItsCoordinatorsDirectory() throws {
        try makeFleet(in: directory + "/capfleet-data/coordinator")
        #expect(try LocalAdministration.dataDirectory(named: directory + "/capfleet-data", newFleet: false)
                == directory + "/capfleet-data/coordinator")
    }

    /// The mistake a third party made: a token for a coordinator that does not exist.
    @Test func aFolderWithoutAFleet_isRefused_namingTheFleetNearby() throws {
        try makeFleet(in: directory + "/coordinator")
        let wrong = directory + "/agent-state"
        try FileManager.default.createDirectory(atPath: wrong, withIntermediateDirectories: true)
        #expect {
            try LocalAdministration.dataDirectory(named: wrong, newFleet: false)
        } throws: { error in
            let text = String(describing: error)
            return text.contains("holds no fleet database") && text.contains("--data \(self.directory)/coordinator") && text.contains("--new-fleet")
        }
        #expect(!FileManager.default.fileExists(atPath: wrong + "/fleet.sqlite"), "nothing was made there")
        #expect(!FileManager.default.fileExists(atPath: wrong + "/keys"))
    }

    @Test func aNewFleet_isMadeOnlyInAFolderOfItsOwn() throws {
        #expect(try LocalAdministration.dataDirectory(named: directory + "/new", newFleet: true) == directory + "/new")
        try "notes".write(toFile: directory + "/busy.txt", atomically: true, encoding: .utf8)
        #expect(throws: LocalAdministrationError.self) { try LocalAdministration.dataDirectory(named: self.directory, newFleet: true) }
    }
}
