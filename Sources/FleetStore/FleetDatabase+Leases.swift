import GRDB

/// A configuration lease as stored: who may change a device, until when.
public struct LeaseRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "configurationLease"
    public var deviceId: String
    public var holder: String
    public var acquiredAt: UnixMilliseconds
    public var expiresAt: UnixMilliseconds
    /// The operator session that holds it; nil for a plain timed lease.
    public var sessionId: String?

    public init(deviceId: String, holder: String, acquiredAt: UnixMilliseconds, expiresAt: UnixMilliseconds, sessionId: String? = nil) {
        self.deviceId = deviceId
        self.holder = holder
        self.acquiredAt = acquiredAt
        self.expiresAt = expiresAt
        self.sessionId = sessionId
    }
}

extension FleetDatabase {
    /// Stores a lease and its audit entry in one transaction.
    public func saveLease(_ lease: LeaseRecord, audit: AuditEntry) async throws(StoreError) {
        try await write("storing the lease on \(lease.deviceId)") { db in
            try lease.save(db)
            _ = try audit.inserted(db)
        }
    }

    /// Removes a lease (released or expired) and records why, in one transaction.
    public func deleteLease(deviceID: String, audit: AuditEntry) async throws(StoreError) {
        try await write("removing the lease on \(deviceID)") { db in
            _ = try LeaseRecord.deleteOne(db, key: deviceID)
            _ = try audit.inserted(db)
        }
    }

    /// Removes the lease `holder` took until `expiresAt` (a later lease on the device stays)
    /// and records why, in one transaction.
    public func removeLease(deviceID: String, holder: String, expiresAt: UnixMilliseconds, audit: AuditEntry) async throws(StoreError) {
        try await write("removing the lease of \(holder) on \(deviceID)") { db in
            _ = try LeaseRecord.filter(Column("deviceId") == deviceID && Column("holder") == holder && Column("expiresAt") == expiresAt)
                .deleteAll(db)
            _ = try audit.inserted(db)
        }
    }

    public func leases() async throws(StoreError) -> [LeaseRecord] {
        try await read("reading leases") { db in try LeaseRecord.fetchAll(db) }
    }
}
