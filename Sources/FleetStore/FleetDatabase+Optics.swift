import FleetCore
import GRDB

/// What an operator recorded of a device's lens (detection.md, "Scan set-up").
public struct DeviceOpticsRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "deviceOptics"
    public var deviceId: String
    public var fieldOfViewDegrees: Double?
    public var minimumFocusMillimetres: Double?
    public var changedAt: UnixMilliseconds
    public var changedBy: String

    public init(deviceId: String, optics: DeviceOptics, changedAt: UnixMilliseconds, changedBy: String) {
        self.deviceId = deviceId
        fieldOfViewDegrees = optics.fieldOfViewDegrees
        minimumFocusMillimetres = optics.minimumFocusDistanceMillimetres
        self.changedAt = changedAt
        self.changedBy = changedBy
    }

    public var optics: DeviceOptics {
        DeviceOptics(fieldOfViewDegrees: fieldOfViewDegrees, minimumFocusDistanceMillimetres: minimumFocusMillimetres)
    }
}

extension FleetDatabase {
    /// Records a device's optics (nothing known: the row goes) and the audit entry, in one transaction.
    public func saveOptics(_ record: DeviceOpticsRecord, audit: AuditEntry) async throws(StoreError) {
        try await write("storing the optics of \(record.deviceId)") { db in
            if record.optics.isEmpty {
                _ = try DeviceOpticsRecord.deleteOne(db, key: record.deviceId)
            } else {
                try record.save(db)
            }
            _ = try audit.inserted(db)
        }
    }

    /// What is recorded of the device's lens; nil when nothing is.
    public func optics(deviceID: String) async throws(StoreError) -> DeviceOpticsRecord? {
        try await read("reading the optics of \(deviceID)") { db in try DeviceOpticsRecord.fetchOne(db, key: deviceID) }
    }
}
