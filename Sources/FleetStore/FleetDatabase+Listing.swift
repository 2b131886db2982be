import FleetCore
import GRDB

/// What a device listing shows of one device that the store keeps.
public struct DeviceListingRow: Sendable {
    public var device: DeviceRecord
    public var activeFormat: VideoFormat?
    public var formatCount: Int
    public var consent: ConsentRecord?
    public var dropRecovery: DropRecoveryPolicyRecord?
    public var pressurePolicy: PressurePolicyRecord?
}

extension FleetDatabase {
    /// Every device (of one node, or one device) with what its listing shows, read in one
    /// transaction with the same few queries whatever the number of devices: a fleet of
    /// hundreds of cameras is listed in one pass, not a round of reads per camera.
    public func deviceListing(nodeID: String? = nil, deviceID: String? = nil) async throws(StoreError) -> [DeviceListingRow] {
        try await read("listing devices") { db in
            var request = DeviceRecord.order(Column("nodeId"), Column("id"))
            if let nodeID { request = request.filter(Column("nodeId") == nodeID) }
            if let deviceID { request = request.filter(Column("id") == deviceID) }
            let devices = try request.fetchAll(db)
            guard !devices.isEmpty else { return [] }
            let wanted = Set(devices.map(\.id))
            func keyed<Record: FetchableRecord & TableRecord>(_ type: Record.Type, by key: KeyPath<Record, String>) throws -> [String: Record] {
                var byDevice: [String: Record] = [:]
                for record in try Record.fetchAll(db) where wanted.contains(record[keyPath: key]) { byDevice[record[keyPath: key]] = record }
                return byDevice
            }
            let consents = try keyed(ConsentRecord.self, by: \.deviceId)
            let dropRecovery = try keyed(DropRecoveryPolicyRecord.self, by: \.deviceId)
            let pressure = try keyed(PressurePolicyRecord.self, by: \.deviceId)
            var counts: [String: Int] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT deviceId, COUNT(*) FROM format GROUP BY deviceId") {
                counts[row[0]] = row[1]
            }
            // Only the active format of each device, with its frame-rate ranges.
            var ranges: [String: [FrameRateRange]] = [:]
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT r.deviceId, r.minFps, r.maxFps FROM frameRateRange r
                    JOIN device d ON d.id = r.deviceId AND d.activeFormatPosition = r.formatPosition
                    ORDER BY r.deviceId, r.position
                    """)
            {
                ranges[row[0], default: []].append(FrameRateRange(min: row[1], max: row[2]))
            }
            var active: [String: VideoFormat] = [:]
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT f.deviceId, f.pixelFormat, f.width, f.height, f.fieldOfViewDegrees, f.maxZoomFactor,
                           f.upscaleThresholdZoomFactor, f.binned, f.bitDepth, f.colour, f.depthUnitMetres
                    FROM format f JOIN device d ON d.id = f.deviceId AND d.activeFormatPosition = f.position
                    """)
            {
                let id: String = row[0]
                active[id] = VideoFormat(
                    pixelFormat: PixelFormat(row[1] as String), width: row[2], height: row[3],
                    frameRateRanges: ranges[id] ?? [], fieldOfViewDegrees: row[4], maxZoomFactor: row[5],
                    upscaleThresholdZoomFactor: row[6], isBinned: row[7], bitDepth: row[8], colour: ColourDescription(row[9] as String),
                    depthUnitMetres: row[10])
            }
            return devices.map { device in
                DeviceListingRow(
                    device: device, activeFormat: active[device.id], formatCount: counts[device.id] ?? 0,
                    consent: consents[device.id], dropRecovery: dropRecovery[device.id], pressurePolicy: pressure[device.id])
            }
        }
    }
}
