import FleetCore
import FleetProtocol
import GRDB
import Testing

@testable import FleetCoordinator
@testable import FleetStore

/// Takes' sync reports through the director: requirements kept from the start, figures so far
/// while recording, the final report stored and audited at the end, in a real database.
@Suite struct TakeSyncDeskTests {
    static func samples(_ frames: UInt64, lateOnCam2: UInt64 = 0) -> [TakeSyncSample] {
        ["cam-1", "cam-2"].map {
            TakeSyncSample(deviceID: $0, nodeID: "node-1", framesCaptured: frames, drops: DropTally(late: $0 == "cam-2" ? lateOnCam2 : 0))
        }
    }

    /// Statuses around a take of one second: before, during, and the first after its stop.
    func record(_ requirements: TakeRequirements, lateOnCam2: UInt64, in bed: DirectorBed) async throws -> String {
        let take = try await bed.director.start(
            deviceIDs: ["cam-1", "cam-2"], name: "t", at: nil, fromNow: 0, requirements: requirements, by: "ana")
        #expect(try await bed.store.takeSync(takeID: take.id)?.requirements == requirements, "kept from the start")
        let sync = bed.director.sync
        await sync.observe(Self.samples(0), at: take.startFleetNs - 500_000_000)
        await sync.observe(Self.samples(30, lateOnCam2: lateOnCam2), at: take.startFleetNs + 500_000_000)
        #expect(await sync.liveReport(takeID: take.id)?.verdict == .recording)
        _ = try await bed.director.stop(takeID: take.id, at: take.startFleetNs + 1_000_000_000, wait: .milliseconds(50), by: "ana")
        #expect(try await bed.store.takeSync(takeID: take.id)?.report == nil, "not before every camera reported after the stop")
        await sync.observe(Self.samples(60, lateOnCam2: lateOnCam2), at: take.startFleetNs + 1_500_000_000)
        #expect(await sync.liveReport(takeID: take.id) == nil, "stored: no longer live")
        return take.id
    }

    @Test func aTakeThatDroppedFrames_isStoredFailed_withTheReasonAudited() async throws {
        let bed = try await DirectorBed(devices: ["cam-1", "cam-2"])
        let takeID = try await record(TakeRequirements(noDrops: true), lateOnCam2: 2, in: bed)
        let stored = try #require(try await bed.store.takeSync(takeID: takeID))
        #expect(stored.verdict == "failed")
        let report = try Capfleet_V1_TakeSyncReport(serializedBytes: try #require(stored.report))
        #expect(report.verdict == .failed && report.failures == ["cam-2 dropped 2 frames (late 2)"])
        #expect(report.cameras.map(\.framesCaptured) == [30, 30], "one second of the take at 30 fps")
        let audit = try await bed.store.lastAudit(action: "recording.sync", target: takeID)
        #expect(audit?.outcome == "failed" && audit?.detail.contains("cam-2 dropped 2 frames") == true, "\(String(describing: audit))")
        #expect(try await bed.store.takeEvents(takeID: takeID).contains { $0.kind == "sync_report" && $0.detail.contains("failed") })
        await bed.director.shutdown()
    }

    @Test func aTakeThatKeptToItsRequirements_isStoredCertified_andAuditedOk() async throws {
        let bed = try await DirectorBed(devices: ["cam-1", "cam-2"])
        let takeID = try await record(TakeRequirements(noDrops: true, clocksLocked: true), lateOnCam2: 0, in: bed)
        #expect(try await bed.store.takeSync(takeID: takeID)?.verdict == "certified")
        #expect(try await bed.store.lastAudit(action: "recording.sync", target: takeID)?.outcome == "ok")
        await bed.director.shutdown()
    }

    /// A take deleted before its report was due leaves nothing behind: no ledger tried again
    /// at every status, no error logged for ever.
    @Test func aTakeDeletedBeforeItsReport_isForgotten_notTriedAgainForEver() async throws {
        let bed = try await DirectorBed(devices: ["cam-1", "cam-2"])
        let take = try await bed.director.start(deviceIDs: ["cam-1", "cam-2"], name: "t", at: nil, fromNow: 0, by: "ana")
        let sync = bed.director.sync
        await sync.observe(Self.samples(30), at: take.startFleetNs + 500_000_000)
        _ = try await bed.director.stop(takeID: take.id, at: take.startFleetNs + 1_000_000_000, wait: .milliseconds(50), by: "ana")
        // Its parts ended (the played agents never say so) and an operator deleted it.
        try await bed.store.writer.write { db in try db.execute(sql: "UPDATE take SET state = 'stopped' WHERE id = ?", arguments: [take.id]) }
        try await bed.store.deleteTake(
            id: take.id, audit: AuditEntry(at: 3, actor: "ana", action: "recording.delete", target: take.id, outcome: "ok", detail: ""))
        #expect(await sync.liveReport(takeID: take.id) != nil, "kept until its report is due")
        await sync.closeEnded(now: take.startFleetNs + 1_000_000_000 + TakeSyncDesk.closeAfterNs)
        #expect(await sync.liveReport(takeID: take.id) == nil, "nothing left to report on: the ledger is gone")
        await bed.director.shutdown()
    }
}
