import GRDB

/// Whether a device is to be aligned to the fleet-time grid (proto-docs/clock.md, "Frame
/// alignment"): the operator's setting, pushed again whenever the device's node registers.
public struct FrameAlignmentRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "frameAlignment"
    public var deviceId: String
    public var enabled: Bool
    public var changedAt: UnixMilliseconds
    public var changedBy: String

    public init(deviceId: String, enabled: Bool, changedAt: UnixMilliseconds, changedBy: String) {
        self.deviceId = deviceId
        self.enabled = enabled
        self.changedAt = changedAt
        self.changedBy = changedBy
    }
}

extension FleetDatabase {
    /// Stores a device's alignment setting and its audit entry in one transaction.
    public func saveFrameAlignment(_ setting: FrameAlignmentRecord, audit: AuditEntry) async throws(StoreError) {
        try await write("storing the frame alignment of \(setting.deviceId)") { db in
            try setting.save(db)
            _ = try audit.inserted(db)
        }
    }

    /// The device's alignment setting; nil when nobody ever set one (alignment off).
    public func frameAlignment(deviceID: String) async throws(StoreError) -> FrameAlignmentRecord? {
        try await read("reading the frame alignment of \(deviceID)") { db in try FrameAlignmentRecord.fetchOne(db, key: deviceID) }
    }
}
