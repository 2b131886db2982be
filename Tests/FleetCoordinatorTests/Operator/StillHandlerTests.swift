import FleetCore
import FleetProtocol
import Foundation
import Testing

@testable import FleetCoordinator
@testable import FleetStore

/// The stills handler on an in-memory store, with the real still director and played agents.
@Suite(.timeLimit(.minutes(1))) struct StillHandlerTests {
    @Test func aStillOfOnlyCamerasWithoutConsent_isRefusedAndAudited() async throws {
        let bed = try await OperatorBed()
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.stills.takeStill(.with { $0.deviceIds = ["cam-1"] }, by: "otto", into: &reply)
        #expect(reply.status.code == .permissionDenied)
        #expect(reply.status.reason.hasPrefix("no still taken: cam-1: consent is "), "\(reply.status.reason)")
        #expect(try await bed.audit("still.take").map(\.outcome) == ["refused"])
        #expect(try await bed.store.stills().isEmpty)
        await bed.close()
    }

    @Test func aStillNamingNoCameras_isABadRequest() async throws {
        let bed = try await OperatorBed()
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.stills.takeStill(.init(), by: "otto", into: &reply)
        #expect(reply.status.code == .badRequest)
        #expect(reply.status.reason == "name the cameras, or ask for --all")
        await bed.close()
    }

    @Test func aStillOfAConsentingCamera_isIndexedListedAndDeleted() async throws {
        let bed = try await OperatorBed()
        _ = try await bed.store.changeConsent(deviceID: "cam-1", action: .grant, role: .admin, actor: "ana", reason: "test", at: 2)
        var taken = Capfleet_V1_OperatorReply()
        try await bed.handlers.stills.takeStill(
            .with {
                $0.deviceIds = ["cam-1"]
                $0.name = "slate"
            }, by: "otto", into: &taken)
        #expect(taken.status.code == .ok, "\(taken.status)")
        let still = try #require(taken.stills.first)
        #expect(still.name == "slate")
        #expect(still.createdBy == "otto")
        #expect(still.devices.map(\.deviceID) == ["cam-1"])
        guard case .captureStill? = await bed.agents.sent(to: "cam-1").first else {
            Issue.record("the camera's agent must be asked for the picture")
            return
        }

        var listed = Capfleet_V1_OperatorReply()
        try await bed.handlers.stills.listStills(into: &listed)
        #expect(listed.stills.map(\.id) == [still.id])
        var shown = Capfleet_V1_OperatorReply()
        try await bed.handlers.stills.showStill(still.id, into: &shown)
        #expect(shown.stills.first?.id == still.id)

        var deleted = Capfleet_V1_OperatorReply()
        try await bed.handlers.stills.deleteStill(still.id, by: "otto", into: &deleted)
        #expect(deleted.status.code == .ok, "\(deleted.status)")
        #expect(try await bed.store.still(id: still.id) == nil)
        #expect(try await bed.audit("still.delete").map(\.outcome) == ["ok"])
        await bed.close()
    }

    @Test func anUnknownStill_isNotFound_andItsRefusedDeleteIsAudited() async throws {
        let bed = try await OperatorBed()
        var shown = Capfleet_V1_OperatorReply()
        try await bed.handlers.stills.showStill("still-9", into: &shown)
        #expect(shown.status.code == .notFound)
        #expect(shown.status.reason == "no still still-9; see capfleet stills list")
        var read = Capfleet_V1_OperatorReply()
        try await bed.handlers.stills.readStillFile(
            .with {
                $0.stillID = "still-9"
                $0.deviceID = "cam-1"
            }, into: &read)
        #expect(read.status.reason == "still still-9 has no picture 0 of cam-1")
        var deleted = Capfleet_V1_OperatorReply()
        try await bed.handlers.stills.deleteStill("still-9", by: "", into: &deleted)
        #expect(deleted.status.code == .notFound)
        let audit = try await bed.audit("still.delete")
        #expect(audit.map(\.outcome) == ["refused"])
        #expect(audit.first?.actor == "unknown operator")
        await bed.close()
    }
}
