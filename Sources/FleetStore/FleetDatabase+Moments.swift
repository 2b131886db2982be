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
    /// What asked for it: "operator".
    public var trigger: String

    public init(
        id: String, name: String, instantFleetNs: UInt64, beforeMs: Int, afterMs: Int, takeId: String, stillId: String,
        devices: [String], createdAt: UnixMilliseconds, createdBy: String, trigger: String
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
    }

    public var devices: [String] { deviceIds.split(separator: ",").map(String.init) }
}

extension FleetDatabase {
    /// Stores a moment and its audit entry, in one transaction.
    public func saveMoment(_ moment: MomentRecord, audit: AuditEntry) async throws(StoreError) {
        try await write("storing moment \(moment.id)") { db in
            try moment.insert(db)
            _ = try audit.inserted(db)
        }
    }

    /// Every moment, the latest first.
    public func moments() async throws(StoreError) -> [MomentRecord] {
        try await read("listing the moments") { db in try MomentRecord.order(Column("instantFleetNs").desc).fetchAll(db) }
    }
}
