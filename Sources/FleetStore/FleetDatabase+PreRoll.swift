import FleetCore
import GRDB

/// A device's pre-roll (recordings.md, "Pre-roll"), as last set: pushed again at every
/// registration.
public struct PreRollRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "devicePreRoll"
    public var deviceId: String
    public var milliseconds: Int
    public var budgetBytes: Int
    public var changedAt: UnixMilliseconds
    public var changedBy: String
    /// Kept encoded (recordings.md, "Encoded pre-roll"); codec nil: raw frames.
    public var codec: VideoCodec?
    public var quality: Int?
    public var bitrate = 0
    public var gop = 0
    /// An encoded pre-roll's disk budget (recordings.md, "On disk"); 0: none.
    public var diskBudgetBytes = 0

    public init(deviceId: String, settings: PreRollSettings, changedAt: UnixMilliseconds, changedBy: String) {
        self.deviceId = deviceId
        milliseconds = Int((settings.seconds * 1000).rounded())
        budgetBytes = settings.budgetBytes
        self.changedAt = changedAt
        self.changedBy = changedBy
        codec = settings.encoding?.codec
        quality = settings.encoding?.quality
        bitrate = settings.encoding?.bitrate ?? 0
        gop = settings.encoding?.gop ?? 0
        diskBudgetBytes = settings.diskBudgetBytes
    }

    public var encoding: TakeEncoding? { codec.map { TakeEncoding(codec: $0, quality: quality, bitrate: bitrate, gop: gop) } }

    public var settings: PreRollSettings {
        milliseconds > 0
            ? PreRollSettings(
                seconds: Double(milliseconds) / 1000, budgetBytes: budgetBytes, encoding: encoding, diskBudgetBytes: diskBudgetBytes) : .off
    }
}

extension FleetDatabase {
    /// Stores a device's pre-roll and the audit entry, in one transaction.
    public func savePreRoll(_ setting: PreRollRecord, audit: AuditEntry) async throws(StoreError) {
        try await write("storing the pre-roll of \(setting.deviceId)") { db in
            try setting.save(db)
            _ = try audit.inserted(db)
        }
    }

    /// The device's pre-roll; nil when nobody ever set it (off).
    public func preRoll(deviceID: String) async throws(StoreError) -> PreRollRecord? {
        try await read("reading the pre-roll of \(deviceID)") { db in try PreRollRecord.fetchOne(db, key: deviceID) }
    }
}
