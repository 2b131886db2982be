import FleetCore
import Foundation
import GRDB

/// A moment (recordings.md, "Moments"): a still of its cameras at one instant and a take
/// around it, linked.
public struct MomentRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "moment"
    public var id: String
    public var name: String
    public var instantFleetNs: UInt64
    public var beforeMs: Int
    public var afterMs: Int
    public var takeId: String
    public var stillId: String
    /// The cameras, comma-separated (device ids hold no commas).
    public var deviceIds: String
    public var createdAt: UnixMilliseconds
    public var createdBy: String
    /// What asked for it: "operator", or "rule NAME".
    public var trigger: String
    /// A rule's moment: what the rule saw (`qr "part-17" on cam-1`); '' for an operator's.
    public var cause: String

    public init(
        id: String, name: String, instantFleetNs: UInt64, beforeMs: Int, afterMs: Int, takeId: String, stillId: String,
        devices: [String], createdAt: UnixMilliseconds, createdBy: String, trigger: String, cause: String = ""
    ) {
        self.id = id
        self.name = name
        self.instantFleetNs = instantFleetNs
        self.beforeMs = beforeMs
        self.afterMs = afterMs
        self.takeId = takeId
        self.stillId = stillId
        deviceIds = devices.joined(separator: ",")
        self.createdAt = createdAt
        self.createdBy = createdBy
        self.trigger = trigger
        self.cause = cause
    }

    public var devices: [String] { deviceIds.split(separator: ",").map(String.init) }
}

extension FleetDatabase {
    /// Stores a moment and its audit entry, in one transaction; a rule's moment counts in the
    /// rule's figures in the same step.
    public func saveMoment(_ moment: MomentRecord, audit: AuditEntry, rule: String? = nil) async throws(StoreError) {
        try await write("storing moment \(moment.id)") { db in
            try moment.insert(db)
            _ = try audit.inserted(db)
            if let rule {
                try db.execute(
                    sql: "UPDATE momentRule SET fired = fired + 1, lastMomentId = ?, lastFiredAt = ? WHERE name = ?",
                    arguments: [moment.id, moment.createdAt, rule])
            }
        }
    }

    /// One moment; nil when there is none of that id.
    public func moment(_ id: String) async throws(StoreError) -> MomentRecord? {
        try await read("reading moment \(id)") { db in try MomentRecord.fetchOne(db, key: id) }
    }

    /// Every moment, the latest first.
    public func moments() async throws(StoreError) -> [MomentRecord] {
        try await read("listing the moments") { db in try MomentRecord.order(Column("instantFleetNs").desc).fetchAll(db) }
    }
}
