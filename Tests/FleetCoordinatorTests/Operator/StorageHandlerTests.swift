import FleetCore
import FleetProtocol
import Foundation
import Testing

@testable import FleetCoordinator
@testable import FleetStore

/// `change_storage` and `list_storage`: a destination is checked, kept with its secrets apart
/// from the database (a 0600 file), audited without their values, listed with their names
/// only, and removed with them.
@Suite(.timeLimit(.minutes(1))) struct StorageHandlerTests {
    private func change(
        _ bed: OperatorBed, _ destination: Capfleet_V1_StorageDestination, remove: Bool = false
    ) async throws
        -> Capfleet_V1_OperatorReply
    {
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.storage.change(
            .with {
                $0.destination = destination
                $0.remove = remove
            }, by: "ada", into: &reply)
        return reply
    }

    static let nas = Capfleet_V1_StorageDestination.with {
        $0.name = "nas"
        $0.backend = "webdav"
        $0.options = ["url": "https://nas.studio/dav", "vendor": "other", "user": "capture"]
        $0.secrets = ["pass": "correct horse"]
        $0.root = "takes/../stage-a"
    }

    @Test func aDestination_isKeptWithItsSecretsApart_listedWithoutThem_andRemovedWithThem() async throws {
        let bed = try await OperatorBed()
        let added = try await change(bed, Self.nas)
        #expect(added.status.code == .ok, "\(added.status)")
        let kept = try #require(added.storage.first)
        #expect(kept.destination.options["url"] == "https://nas.studio/dav" && kept.destination.secrets.isEmpty)
        #expect(kept.secretKeys == ["pass"] && kept.secretsMissing.isEmpty && kept.createdBy == "ada")
        #expect(kept.destination.root == "takes/stage-a", "no '..' climbs out of the root")

        // The secret is in a file only its owner reads, not in the database or the audit log.
        let file = bed.directory + "/keys/storage/nas.json"
        let attributes = try FileManager.default.attributesOfItem(atPath: file)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        #expect(try String(contentsOfFile: file, encoding: .utf8).contains("correct horse"))
        let rows = try await bed.store.storageDestinations()
        #expect(rows.count == 1 && !"\(rows)".contains("correct horse"))
        let audit = try await bed.audit("storage.add")
        #expect(audit.count == 1 && audit[0].detail.contains("secrets pass kept apart") && !audit[0].detail.contains("correct horse"), "\(audit)")

        var listed = Capfleet_V1_OperatorReply()
        try await bed.handlers.storage.list(into: &listed)
        #expect(listed.storage.map(\.destination.name) == ["nas"] && listed.storage[0].destination.secrets.isEmpty)

        // A backup restored elsewhere holds the row but not the file: the listing says so.
        try FileManager.default.removeItem(atPath: file)
        var restored = Capfleet_V1_OperatorReply()
        try await bed.handlers.storage.list(into: &restored)
        #expect(restored.storage.first?.secretsMissing == ["pass"])

        _ = try await change(bed, Self.nas)
        let removed = try await change(bed, .with { $0.name = "nas" }, remove: true)
        #expect(removed.status.code == .ok && removed.storage.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: file), "its secrets go with it")
        #expect(try await bed.audit("storage.remove").count == 1)
        let again = try await change(bed, .with { $0.name = "nas" }, remove: true)
        #expect(again.status.code == .notFound && again.status.reason.contains("capfleet storage list"))
        await bed.close()
    }

    @Test func aDestinationRcloneCouldNotUse_isRefusedSayingWhy() async throws {
        let bed = try await OperatorBed()
        var unknown = Self.nas
        unknown.backend = "nfs4"
        let refused = try await change(bed, unknown)
        #expect(refused.status.code == .badRequest && refused.status.reason.contains("webdav"), "\(refused.status)")
        var twice = Self.nas
        twice.options["pass"] = "shown"
        #expect(try await change(bed, twice).status.reason.contains("given both"))
        var named = Self.nas
        named.name = "my nas"
        #expect(try await change(bed, named).status.code == .badRequest)
        #expect(try await bed.store.storageDestinations().isEmpty && bed.handlers.storage.secrets.directory.hasSuffix("keys/storage"))
        #expect(!FileManager.default.fileExists(atPath: bed.directory + "/keys/storage/nas.json"), "nothing kept of a refused one")
        await bed.close()
    }
}
