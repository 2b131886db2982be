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

    /// `capfleet dev` at Ctrl-C: the takes still recording, which go on after a restart.
    @Test func takesStillRecording_areNamedWithHowTheyResume() async throws {
        let folder = directory + "/dev/coordinator"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        do {
            let store = try FleetDatabase(path: folder + "/fleet.sqlite")
            for (id, name) in [("take-1", "take-1"), ("take-2", "tour")] {
                var take = TakeRecord(id: id, name: name, startFleetNs: 1, directory: folder + "/" + id, createdAt: 1, createdBy: "ana")
                take.store = .agent
                try await store.createTake(
                    take, devices: [], audit: AuditEntry(at: 1, actor: "ana", action: "recording.start", target: id, outcome: "ok"))
            }
            try await store.endTake(
                id: "take-1", state: .stopped, stopFleetNs: 2, at: 2,
                audit: AuditEntry(at: 2, actor: "ana", action: "recording.stop", target: "take-1", outcome: "ok"))
        }
        let takes = try await LocalAdministration.takesInProgress(dataDirectory: folder)
        #expect(takes.map(\.id) == ["take-2"])
        let note = try #require(LocalAdministration.inProgressNote(takes, restart: "capfleet dev --data \(directory)/dev"))
        #expect(note.contains("take-2 (tour), started by ana, written by the agents"), "\(note)")
        #expect(note.contains("It resumes when the fleet starts again (capfleet dev --data \(directory)/dev)"), "\(note)")
        #expect(note.contains("capfleet record stop take-2"))
        #expect(LocalAdministration.inProgressNote([], restart: "x") == nil)
    }

    @Test func aFolderWithAFleetDatabase_isTheDataDirectory() throws {
        try makeFleet(in: directory + "/coord")
        #expect(try LocalAdministration.dataDirectory(named: directory + "/coord", newFleet: false) == directory + "/coord")
    }

    /// `capfleet dev --data DIR` keeps its coordinator's data in DIR/coordinator: either name works.
    @Test func aDevFleetsFolder_namesItsCoordinatorsDirectory() throws {
        try makeFleet(in: directory + "/capfleet-data/coordinator")
        #expect(
            try LocalAdministration.dataDirectory(named: directory + "/capfleet-data", newFleet: false)
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
