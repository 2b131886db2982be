import FleetCore
import GRDB

/// Cumulative counters for one device, flushed by the coordinator every few seconds.
public struct DeviceCountersUpdate: Sendable {
    public var deviceID: String
    public var framesReceived: UInt64
    public var bytesReceived: UInt64
    public var drops: DropTally
    public var lastFrameAt: UnixMilliseconds?

    public init(deviceID: String, framesReceived: UInt64, bytesReceived: UInt64, drops: DropTally, lastFrameAt: UnixMilliseconds?) {
        self.deviceID = deviceID
        self.framesReceived = framesReceived
        self.bytesReceived = bytesReceived
        self.drops = drops
        self.lastFrameAt = lastFrameAt
    }
}

extension FleetDatabase {
    public func devices(nodeID: String? = nil) async throws(StoreError) -> [DeviceRecord] {
        try await read("listing devices") { db in
            var request = DeviceRecord.order(Column("nodeId"), Column("id"))
            if let nodeID { request = request.filter(Column("nodeId") == nodeID) }
            return try request.fetchAll(db)
        }
    }

    public func device(_ deviceID: String) async throws(StoreError) -> DeviceRecord? {
        try await read("reading device \(deviceID)") { db in try DeviceRecord.fetchOne(db, key: deviceID) }
    }

    /// The device's whole format list, in the order its agent reported it.
    public func formats(deviceID: String) async throws(StoreError) -> [VideoFormat] {
        try await read("reading formats of \(deviceID)") { db in try Self.readFormats(db, deviceID: deviceID) }
    }

    /// Every format of these devices (nil: of every device), in two reads whatever their number.
    public func formats(deviceIDs: Set<String>?) async throws(StoreError) -> [String: [VideoFormat]] {
        try await read("reading the devices' formats") { db in
            var ranges: [String: [Int: [FrameRateRange]]] = [:]
            let rangeRows = try Row.fetchCursor(
                db, sql: "SELECT deviceId, formatPosition, minFps, maxFps FROM frameRateRange ORDER BY deviceId, formatPosition, position")
            while let row = try rangeRows.next() {
                let device: String = row[0]
                guard deviceIDs?.contains(device) ?? true else { continue }
                ranges[device, default: [:]][row[1], default: []].append(FrameRateRange(min: row[2], max: row[3]))
            }
            var formats: [String: [VideoFormat]] = [:]
            let formatRows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT deviceId, position, pixelFormat, width, height, fieldOfViewDegrees, maxZoomFactor, upscaleThresholdZoomFactor, binned, bitDepth,
                           colour, depthUnitMetres
                    FROM format ORDER BY deviceId, position
                    """)
            while let row = try formatRows.next() {
                let device: String = row[0]
                guard deviceIDs?.contains(device) ?? true else { continue }
                formats[device, default: []].append(
                    VideoFormat(
                        pixelFormat: PixelFormat(row[2] as String), width: row[3], height: row[4],
                        frameRateRanges: ranges[device]?[row[1]] ?? [], fieldOfViewDegrees: row[5], maxZoomFactor: row[6],
                        upscaleThresholdZoomFactor: row[7], isBinned: row[8], bitDepth: row[9], colour: ColourDescription(row[10] as String),
                        depthUnitMetres: row[11]))
            }
            return formats
        }
    }

    /// Read row by row rather than decoded as records: a camera may have hundreds of formats.
    static func readFormats(_ db: Database, deviceID: String) throws -> [VideoFormat] {
        var ranges: [Int: [FrameRateRange]] = [:]
        let rangeRows = try Row.fetchCursor(
            db,
            sql: """
                SELECT formatPosition, minFps, maxFps FROM frameRateRange WHERE deviceId = ? ORDER BY formatPosition, position
                """, arguments: [deviceID])
        while let row = try rangeRows.next() {
            ranges[row[0], default: []].append(FrameRateRange(min: row[1], max: row[2]))
        }
        var formats: [VideoFormat] = []
        let formatRows = try Row.fetchCursor(
            db,
            sql: """
                SELECT position, pixelFormat, width, height, fieldOfViewDegrees, maxZoomFactor, upscaleThresholdZoomFactor, binned, bitDepth,
                       colour, depthUnitMetres
                FROM format WHERE deviceId = ? ORDER BY position
                """, arguments: [deviceID])
        while let row = try formatRows.next() {
            formats.append(
                VideoFormat(
                    pixelFormat: PixelFormat(row[1] as String), width: row[2], height: row[3],
                    frameRateRanges: ranges[row[0]] ?? [], fieldOfViewDegrees: row[4], maxZoomFactor: row[5],
                    upscaleThresholdZoomFactor: row[6], isBinned: row[7], bitDepth: row[8], colour: ColourDescription(row[9] as String),
                    depthUnitMetres: row[10]))
        }
        return formats
    }

    /// Frame and byte counters only grow (the coordinator resumes from the stored values
    /// after a restart), so a late or repeated flush can never move them backwards. Counts
    /// stop at Int64.max, where SQLite's integers end, rather than trap.
    public func updateDeviceCounters(_ updates: [DeviceCountersUpdate]) async throws(StoreError) {
        guard !updates.isEmpty else { return }
        try await write("storing device counters") { db in
            let update = try db.cachedStatement(
                sql: """
                    UPDATE device SET framesReceived = MAX(framesReceived, ?), bytesReceived = MAX(bytesReceived, ?),
                        dropsLate = ?, dropsOutOfBuffers = ?, dropsDiscontinuity = ?, dropsEncoderLate = ?,
                        lastFrameAt = COALESCE(?, lastFrameAt)
                    WHERE id = ?
                    """)
            for counters in updates {
                try update.execute(arguments: [
                    Int64(clamping: counters.framesReceived), Int64(clamping: counters.bytesReceived),
                    Int64(clamping: counters.drops.late), Int64(clamping: counters.drops.outOfBuffers),
                    Int64(clamping: counters.drops.discontinuity), Int64(clamping: counters.drops.encoderLate),
                    counters.lastFrameAt,
                    counters.deviceID,
                ])
            }
        }
    }

    public func appendAudit(_ entry: AuditEntry) async throws(StoreError) {
        try await write("appending to the audit log") { db in _ = try entry.inserted(db) }
    }

    /// The latest audit entry of `action` on `target`, e.g. who stopped a take.
    public func lastAudit(action: String, target: String) async throws(StoreError) -> AuditEntry? {
        try await read("reading the audit log") { db in
            try AuditEntry.filter(Column("action") == action && Column("target") == target).order(Column("id").desc).fetchOne(db)
        }
    }

    public func auditLog(limit: Int = 100) async throws(StoreError) -> [AuditEntry] {
        try await read("reading the audit log") { db in
            try AuditEntry.order(Column("id").desc).limit(limit).fetchAll(db)
        }
    }
}

extension FleetDatabase {
    /// Records the device's active format and frame rate as its agent reported them after a command.
    public func setActiveFormat(deviceID: String, position: Int, frameRate: Double) async throws(StoreError) {
        try await write("storing the active format of \(deviceID)") { db in
            try db.execute(
                sql: "UPDATE device SET activeFormatPosition = ?, activeFrameRate = ? WHERE id = ?",
                arguments: [position, frameRate, deviceID])
            guard db.changesCount == 1 else { throw StoreError.notFound(what: "device \(deviceID)") }
        }
    }
}
