import Foundation
import GRDB

/// A device's drop-recovery policy as stored (see FleetCore.DropRecoveryPolicy).
public struct DropRecoveryPolicyRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "dropRecoveryPolicy"
    public var deviceId: String
    public var enabled: Bool
    public var minimumFps: Double
    public var lateDropShare: Double
    public var quietSeconds: Int
    public var updatedAt: UnixMilliseconds

    public init(deviceId: String, enabled: Bool, minimumFps: Double, lateDropShare: Double, quietSeconds: Int, updatedAt: UnixMilliseconds) {
        self.deviceId = deviceId
        self.enabled = enabled
        self.minimumFps = minimumFps
        self.lateDropShare = lateDropShare
        self.quietSeconds = quietSeconds
        self.updatedAt = updatedAt
    }
}

/// A device's pressure policy as stored (see FleetCore.PressurePolicy); `level` is
/// PressureLevel's raw value (1 fair … 4 shutdown).
public struct PressurePolicyRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "pressurePolicy"
    public var deviceId: String
    public var enabled: Bool
    public var level: Int
    public var frameRate: Double
    public var updatedAt: UnixMilliseconds

    public init(deviceId: String, enabled: Bool, level: Int, frameRate: Double, updatedAt: UnixMilliseconds) {
        self.deviceId = deviceId
        self.enabled = enabled
        self.level = level
        self.frameRate = frameRate
        self.updatedAt = updatedAt
    }
}

extension FleetDatabase {
    /// Stores a pressure policy and its audit entry in one transaction.
    public func savePressurePolicy(_ policy: PressurePolicyRecord, audit: AuditEntry) async throws(StoreError) {
        try await write("storing the pressure policy of \(policy.deviceId)") { db in
            try policy.save(db)
            _ = try audit.inserted(db)
        }
    }

    public func pressurePolicy(deviceID: String) async throws(StoreError) -> PressurePolicyRecord? {
        try await read("reading the pressure policy of \(deviceID)") { db in try PressurePolicyRecord.fetchOne(db, key: deviceID) }
    }

    /// Stores a policy and its audit entry in one transaction.
    public func saveDropRecoveryPolicy(_ policy: DropRecoveryPolicyRecord, audit: AuditEntry) async throws(StoreError) {
        try await write("storing the drop-recovery policy of \(policy.deviceId)") { db in
            try policy.save(db)
            _ = try audit.inserted(db)
        }
    }

    public func dropRecoveryPolicy(deviceID: String) async throws(StoreError) -> DropRecoveryPolicyRecord? {
        try await read("reading the drop-recovery policy of \(deviceID)") { db in try DropRecoveryPolicyRecord.fetchOne(db, key: deviceID) }
    }

    /// The device's last self-description (protobuf bytes), stored at registration.
    public func saveDescriptor(deviceID: String, bytes: Data) async throws(StoreError) {
        try await write("storing the descriptor of \(deviceID)") { db in
            try db.execute(sql: "UPDATE device SET descriptor = ? WHERE id = ?", arguments: [bytes, deviceID])
        }
    }

    public func descriptor(deviceID: String) async throws(StoreError) -> Data? {
        try await read("reading the descriptor of \(deviceID)") { db in
            try Data.fetchOne(db, sql: "SELECT descriptor FROM device WHERE id = ?", arguments: [deviceID])
        }
    }
}
