import FleetCore
import GRDB

/// What a device's agent looks for (detection.md), as last set: pushed again at every registration.
public struct DetectionSettingsRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "deviceDetection"
    public var deviceId: String
    /// Symbologies, comma-separated; empty: no codes.
    public var codes: String
    public var faces: Bool
    public var regionX: Double
    public var regionY: Double
    public var regionWidth: Double
    public var regionHeight: Double
    public var framesPerSecond: Double
    /// Auto-framing's settings (`FramingSettings.stored`); empty: off.
    public var framing: String
    public var changedAt: UnixMilliseconds
    public var changedBy: String

    public init(deviceId: String, settings: DetectionSettings, changedAt: UnixMilliseconds, changedBy: String) {
        self.deviceId = deviceId
        codes = settings.codes.map(\.rawValue).joined(separator: ",")
        faces = settings.faces
        regionX = settings.region.x
        regionY = settings.region.y
        regionWidth = settings.region.width
        regionHeight = settings.region.height
        framesPerSecond = settings.framesPerSecond
        framing = settings.framing?.stored ?? ""
        self.changedAt = changedAt
        self.changedBy = changedBy
    }

    public var settings: DetectionSettings {
        DetectionSettings(
            codes: codes.split(separator: ",").compactMap { BarcodeSymbology(rawValue: String($0)) }, faces: faces,
            region: NormalizedRect(x: regionX, y: regionY, width: regionWidth, height: regionHeight), framesPerSecond: framesPerSecond,
            framing: FramingSettings(stored: framing))
    }
}

extension FleetDatabase {
    /// Stores a device's detection settings and the audit entry, in one transaction.
    public func saveDetection(_ setting: DetectionSettingsRecord, audit: AuditEntry) async throws(StoreError) {
        try await write("storing the detection settings of \(setting.deviceId)") { db in
            try setting.save(db)
            _ = try audit.inserted(db)
        }
    }

    /// The device's detection settings; nil when nobody ever set them (nothing detected).
    public func detection(deviceID: String) async throws(StoreError) -> DetectionSettingsRecord? {
        try await read("reading the detection settings of \(deviceID)") { db in try DetectionSettingsRecord.fetchOne(db, key: deviceID) }
    }

    /// Every device's settings that detect something, by device.
    public func detections() async throws(StoreError) -> [String: DetectionSettingsRecord] {
        try await read("reading the detection settings") { db in
            Dictionary(
                try DetectionSettingsRecord.fetchAll(db).filter { $0.settings.isOn }.map { ($0.deviceId, $0) }, uniquingKeysWith: { a, _ in a })
        }
    }
}
