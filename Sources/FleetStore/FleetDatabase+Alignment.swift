import GRDB

/// Whether a device is to be aligned to the fleet-time grid (proto-docs/clock.md, "Frame
/// alignment"): the operator's setting, pushed again whenever the device's node registers.
public struct FrameAlignmentRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "frameAlignment"
    public var deviceId: String
    public var enabled: Bool
    public var changedAt: UnixMilliseconds
    public var changedBy: String
    /// Wired to other cameras (clock.md, "Hardware-line triggers"): the input line it exposes
    /// on, the camera driving it ('' for an external generator), and the output line it drives.
    public var triggerLine: String
    public var lineSourceDeviceId: String
    public var outputLine: String

    public init(
        deviceId: String, enabled: Bool, changedAt: UnixMilliseconds, changedBy: String, triggerLine: String = "", lineSourceDeviceId: String = "",
        outputLine: String = ""
    ) {
        self.deviceId = deviceId
        self.enabled = enabled
        self.changedAt = changedAt
        self.changedBy = changedBy
        self.triggerLine = triggerLine
        self.lineSourceDeviceId = lineSourceDeviceId
        self.outputLine = outputLine
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
