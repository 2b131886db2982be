import FleetCore
import GRDB

/// A microphone's processing (microphones.md, "Processing"), as last set: pushed again at every
/// registration.
public struct AudioProcessingRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "deviceAudioProcessing"
    public var deviceId: String
    public var highPassHertz: Double
    public var noiseSuppressionDecibels: Double
    public var gainDecibels: Double
    public var changedAt: UnixMilliseconds
    public var changedBy: String

    public init(deviceId: String, settings: AudioProcessingSettings, changedAt: UnixMilliseconds, changedBy: String) {
        self.deviceId = deviceId
        highPassHertz = settings.highPassHertz
        noiseSuppressionDecibels = settings.noiseSuppressionDecibels
        gainDecibels = settings.gainDecibels
        self.changedAt = changedAt
        self.changedBy = changedBy
    }

    public var settings: AudioProcessingSettings {
        AudioProcessingSettings(highPassHertz: highPassHertz, noiseSuppressionDecibels: noiseSuppressionDecibels, gainDecibels: gainDecibels)
    }
}

extension FleetDatabase {
    /// Stores a microphone's processing and the audit entry, in one transaction.
    public func saveAudioProcessing(_ setting: AudioProcessingRecord, audit: AuditEntry) async throws(StoreError) {
        try await write("storing the audio processing of \(setting.deviceId)") { db in
            try setting.save(db)
            _ = try audit.inserted(db)
        }
    }

    /// The microphone's processing; nil when nobody ever set it (none).
    public func audioProcessing(deviceID: String) async throws(StoreError) -> AudioProcessingRecord? {
        try await read("reading the audio processing of \(deviceID)") { db in try AudioProcessingRecord.fetchOne(db, key: deviceID) }
    }
}
