import FleetCore
import FleetProtocol
import Foundation
import Testing

@testable import FleetCoordinator
@testable import FleetStore

/// The takes handler and the recording files handler on an in-memory store, with the real
/// take director and played agents.
@Suite(.timeLimit(.minutes(1))) struct TakeHandlerTests {
    /// cam-1 granted, so that it may be recorded.
    private func consenting() async throws -> OperatorBed {
        let bed = try await OperatorBed()
        _ = try await bed.store.changeConsent(deviceID: "cam-1", action: .grant, role: .admin, actor: "ana", reason: "test", at: 2)
        return bed
    }

    @Test func aTake_isStartedAndStopped_andASecondStopSaysNothingChanged() async throws {
        let bed = try await consenting()
        var started = Capfleet_V1_OperatorReply()
        try await bed.handlers.takes.startRecording(
            .with {
                $0.deviceIds = ["cam-1"]
                $0.name = "scene 1"
            }, by: "otto", into: &started)
        #expect(started.status.code == .ok, "\(started.status)")
        let take = try #require(started.takes.first)
        #expect(take.name == "scene 1")
        #expect(take.devices.map(\.deviceID) == ["cam-1"])
        #expect(take.devices.first?.nodeOnline == true)
        #expect(try await bed.store.takes().map(\.id) == [take.id])

        var stopped = Capfleet_V1_OperatorReply()
        try await bed.handlers.takes.stopRecording(
            .with {
                $0.takeID = take.id
                $0.waitMs = 50
            }, by: "otto", into: &stopped)
        #expect(stopped.status.code == .ok, "\(stopped.status)")
        #expect(stopped.status.reason.isEmpty)

        var again = Capfleet_V1_OperatorReply()
        try await bed.handlers.takes.stopRecording(
            .with {
                $0.takeID = take.id
                $0.waitMs = 50
            }, by: "ana", into: &again)
        #expect(again.status.code == .ok)
        #expect(again.status.reason.hasSuffix("; nothing changed"), "\(again.status.reason)")
        #expect(try await bed.store.auditLog(actionPrefix: "recording.stop").count == 1)
        await bed.close()
    }

    @Test func aTakeOfNoDevices_isRefusedAsTheDirectorSays() async throws {
        let bed = try await consenting()
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.takes.startRecording(.init(), by: "otto", into: &reply)
        #expect(reply.status.code == .badRequest)
        #expect(reply.status.reason == "name the devices to record (capfleet devices lists them)")
        #expect(try await bed.store.takes().isEmpty)
        await bed.close()
    }

    @Test func aNoteThatIsNotOneJSONObject_isABadRequest() async throws {
        let bed = try await consenting()
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.takes.noteRecording(
            .with {
                $0.takeID = "take-1"
                $0.json = "[1, 2]"
            }, by: "otto", into: &reply)
        #expect(reply.status.code == .badRequest)
        #expect(reply.status.reason == #"the note must be one JSON object, e.g. {"location":"stage 2"}"#)
        await bed.close()
    }

    @Test func anUnknownTake_isNotFound_whetherShownCollectedVerifiedOrDeleted() async throws {
        let bed = try await consenting()
        var shown = Capfleet_V1_OperatorReply()
        try await bed.handlers.takes.showRecording("take-9", into: &shown)
        #expect(shown.status.code == .notFound)
        #expect(shown.status.reason == "no take take-9; see capfleet recordings list")
        var collected = Capfleet_V1_OperatorReply()
        try await bed.handlers.takes.collectRecording("take-9", by: "otto", into: &collected)
        #expect(collected.status.reason == "no take take-9; see capfleet recordings list")
        var verified = Capfleet_V1_OperatorReply()
        try await bed.handlers.recordingFiles.verifyRecording(.with { $0.takeID = "take-9" }, into: &verified)
        #expect(verified.status.code == .notFound)
        var deleted = Capfleet_V1_OperatorReply()
        try await bed.handlers.recordingFiles.deleteRecording("take-9", by: "otto", into: &deleted)
        #expect(deleted.status.code == .notFound)
        var read = Capfleet_V1_OperatorReply()
        try await bed.handlers.recordingFiles.readSegment(
            .with {
                $0.takeID = "take-9"
                $0.deviceID = "cam-1"
            }, into: &read)
        #expect(read.status.reason == "take take-9 has no segment 0 of cam-1")
        await bed.close()
    }

    @Test func aRecordingTake_mayNotBeDeleted_aFailedOneIsListedShownAndDeletedWithItsAudit() async throws {
        let bed = try await consenting()
        var recording = Capfleet_V1_OperatorReply()
        try await bed.handlers.takes.startRecording(.with { $0.deviceIds = ["cam-1"] }, by: "otto", into: &recording)
        let running = try #require(recording.takes.first?.id)
        var refused = Capfleet_V1_OperatorReply()
        try await bed.handlers.recordingFiles.deleteRecording(running, by: "ana", into: &refused)
        #expect(refused.status.code == .badRequest)
        #expect(refused.status.reason == "take \(running) is still recording: stop it first (capfleet record stop \(running))")

        // A take whose agent refused to start it fails, and stays in the index until deleted.
        _ = try await bed.store.changeConsent(deviceID: "cam-2", action: .grant, role: .admin, actor: "ana", reason: "test", at: 2)
        await bed.agents.refuse("cam-2", reason: "no clock estimate yet")
        var failed = Capfleet_V1_OperatorReply()
        try await bed.handlers.takes.startRecording(.with { $0.deviceIds = ["cam-2"] }, by: "otto", into: &failed)
        #expect(failed.status.code != .ok)
        #expect(failed.status.reason == "the take did not start: cam-2: no clock estimate yet")
        let takeID = try #require(try await bed.store.takes().first { $0.state == .failed }?.id)

        var listed = Capfleet_V1_OperatorReply()
        try await bed.handlers.takes.listRecordings(into: &listed)
        #expect(Set(listed.takes.map(\.id)) == [running, takeID])
        var shown = Capfleet_V1_OperatorReply()
        try await bed.handlers.takes.showRecording(takeID, into: &shown)
        #expect(shown.status.code == .ok)
        #expect(shown.takes.first?.state == "failed")

        var deleted = Capfleet_V1_OperatorReply()
        try await bed.handlers.recordingFiles.deleteRecording(takeID, by: "ana", into: &deleted)
        #expect(deleted.status.code == .ok, "\(deleted.status)")
        #expect(try await bed.store.take(id: takeID) == nil)
        #expect(try await bed.audit("recording.delete").map(\.actor) == ["ana"])
        #expect(bed.events.recent(limit: 20).contains { $0.message.hasPrefix("ana deleted take \(takeID)") })
        await bed.close()
    }

    @Test func theIndexsAccounting_namesFramesThatDoNotAddUp() {
        var device = TakeDeviceRecord(takeId: "take-1", deviceId: "cam-1", nodeId: "node-a")
        device.state = .stopped
        device.frames = 10
        device.firstSequence = 1
        device.lastSequence = 12
        let problems = RecordingFilesHandler.accountingProblems(devices: [device], segments: [])
        #expect(problems.contains("cam-1: its segments hold 0 frames, its tally says 10"))
        #expect(problems.contains("cam-1: frames 1…12 are 12, but 10 stored and 0 dropped make 10"))
    }
}
