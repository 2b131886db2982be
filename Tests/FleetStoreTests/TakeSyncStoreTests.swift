import FleetCore
import FleetStore
import Foundation
import Testing

/// A take's requirements and sync report in a real SQLite file.
@Suite final class TakeSyncStoreTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-sync-\(UUID().uuidString.prefix(8))").path

    init() throws { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    func started(_ store: FleetDatabase, requirements: TakeRequirements = TakeRequirements()) async throws {
        try await store.createTake(
            TakeRecord(
                id: "take-1", name: "scene 4", startFleetNs: 1_795_000_000_000_000_000, directory: directory + "/take-1", createdAt: 1_000,
                createdBy: "operator:ana"),
            devices: [TakeDeviceRecord(takeId: "take-1", deviceId: "cam-a", nodeId: "node-1")], requirements: requirements,
            audit: AuditEntry(at: 1_000, actor: "operator:ana", action: "recording.start", target: "take-1", outcome: "ok"))
    }

    @Test func theRequirementsAndTheFinalReport_surviveReopening_withTheAudit() async throws {
        let path = directory + "/fleet.sqlite"
        let store = try FleetDatabase(path: path)
        let asked = TakeRequirements(maxSpreadNs: 1_000_000, noDrops: true)
        try await started(store, requirements: asked)
        #expect(try await FleetDatabase(path: path).takeSync(takeID: "take-1")?.requirements == asked, "kept from the start, for a restart")
        #expect(try await store.takeSync(takeID: "take-1")?.verdict == "recording")

        let report = Data([0x08, 0x04, 0x12, 0x03, 0x61, 0x62, 0x63])
        try await store.recordTakeSyncReport(
            takeID: "take-1", verdict: .failed, report: report, at: 2_000,
            audit: AuditEntry(at: 2_000, actor: "coordinator", action: "recording.sync", target: "take-1", outcome: "failed", detail: "abc"))

        let reopened = try FleetDatabase(path: path)
        let stored = try #require(try await reopened.takeSync(takeID: "take-1"))
        #expect(stored.requirements == asked && stored.verdict == "failed" && stored.report == report && stored.reportedAt == 2_000)
        #expect(try await reopened.lastAudit(action: "recording.sync", target: "take-1")?.outcome == "failed")
    }

    @Test func aReportIsStoredOnce_andNeverAsRecording() async throws {
        let store = try FleetDatabase(path: directory + "/fleet.sqlite")
        try await started(store)
        await #expect(throws: StoreError.self) {
            try await store.recordTakeSyncReport(takeID: "take-1", verdict: .recording, report: Data([1]), at: 1, audit: nil)
        }
        try await store.recordTakeSyncReport(takeID: "take-1", verdict: .reported, report: Data([1]), at: 1, audit: nil)
        await #expect(throws: StoreError.self) {
            try await store.recordTakeSyncReport(takeID: "take-1", verdict: .certified, report: Data([2]), at: 2, audit: nil)
        }
        #expect(try await store.takeSync(takeID: "take-1")?.verdict == "reported")
    }

    @Test func aReportForNoTake_isRefused_andDeletingTheTakeDeletesIt() async throws {
        let store = try FleetDatabase(path: directory + "/fleet.sqlite")
        await #expect(throws: StoreError.self) {
            try await store.recordTakeSyncReport(takeID: "take-9", verdict: .reported, report: Data([1]), at: 1, audit: nil)
        }
        try await started(store)
        try await store.recordTakeSyncReport(takeID: "take-1", verdict: .reported, report: Data([1]), at: 1, audit: nil)
        try await store.endTake(
            id: "take-1", state: .stopped, stopFleetNs: 1_795_000_001_000_000_000, at: 3,
            audit: AuditEntry(at: 3, actor: "operator:ana", action: "recording.stop", target: "take-1", outcome: "ok"))
        try await store.deleteTake(
            id: "take-1", audit: AuditEntry(at: 4, actor: "operator:ana", action: "recordings.delete", target: "take-1", outcome: "ok"))
        #expect(try await store.takeSync(takeID: "take-1") == nil)
    }
}
