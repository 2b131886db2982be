import FleetCore
import Foundation
import GRDB

/// A take's requirements from its start, and its sync report once it ended
/// (recordings.md, "Sync and integrity"). The report is kept as the serialized TakeSyncReport
/// the operator's replies carry, so what was judged is what is shown, after any restart.
public struct TakeSyncRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "takeSync"
    public var takeId: String
    public var maxSpreadNs: UInt64
    public var noDrops: Bool
    public var clocksLocked: Bool
    public var inPhase: Bool
    /// recording until the report is stored, then reported, certified or failed.
    public var verdict: String
    public var report: Data?
    public var reportedAt: UnixMilliseconds?

    public init(takeId: String, requirements: TakeRequirements) {
        self.takeId = takeId
        maxSpreadNs = requirements.maxSpreadNs
        noDrops = requirements.noDrops
        clocksLocked = requirements.clocksLocked
        inPhase = requirements.inPhase
        verdict = TakeSyncVerdict.Outcome.recording.rawValue
    }

    public var requirements: TakeRequirements {
        TakeRequirements(maxSpreadNs: maxSpreadNs, noDrops: noDrops, clocksLocked: clocksLocked, inPhase: inPhase)
    }
}

extension FleetDatabase {
    /// A take's final sync report and verdict, with the audit entry, in one transaction. A
    /// report is stored once: a second one for the same take is refused.
    public func recordTakeSyncReport(
        takeID: String, verdict: TakeSyncVerdict.Outcome, report: Data, at: UnixMilliseconds, audit: AuditEntry?
    ) async throws(StoreError) {
        try await write("storing the sync report of take \(takeID)") { db in
            guard try TakeRecord.fetchOne(db, key: takeID) != nil else { throw StoreError.notFound(what: "take \(takeID)") }
            var record = try TakeSyncRecord.fetchOne(db, key: takeID) ?? TakeSyncRecord(takeId: takeID, requirements: TakeRequirements())
            guard record.report == nil else { throw StoreError.refused(reason: "take \(takeID) has its sync report already") }
            guard verdict != .recording else { throw StoreError.refused(reason: "a take's stored report is its final one, not RECORDING") }
            record.verdict = verdict.rawValue
            record.report = report
            record.reportedAt = at
            try record.save(db)
            if let audit { _ = try audit.inserted(db) }
        }
    }

    public func takeSync(takeID: String) async throws(StoreError) -> TakeSyncRecord? {
        try await read("reading the sync report of take \(takeID)") { db in try TakeSyncRecord.fetchOne(db, key: takeID) }
    }
}
