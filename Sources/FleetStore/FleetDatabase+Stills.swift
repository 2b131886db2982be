import FleetCore
import GRDB

/// One still request (stills.md): pictures of several cameras at one fleet instant.
public struct StillRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "still"
    public var id: String
    public var name: String
    public var requestedFleetNs: UInt64
    /// png or jpeg.
    public var encoding: String
    /// The bracket's EV offsets, comma-separated; empty: one picture each.
    public var bracket: String
    public var directory: String
    public var createdAt: UnixMilliseconds
    public var createdBy: String
    /// When the last picture was stored on the coordinator.
    public var storedAt: UnixMilliseconds?

    public init(
        id: String, name: String, requestedFleetNs: UInt64, encoding: String, bracket: [Double], directory: String,
        createdAt: UnixMilliseconds, createdBy: String
    ) {
        self.id = id
        self.name = name
        self.requestedFleetNs = requestedFleetNs
        self.encoding = encoding
        self.bracket = bracket.map { String($0) }.joined(separator: ",")
        self.directory = directory
        self.createdAt = createdAt
        self.createdBy = createdBy
    }

    public var bracketEV: [Double] { bracket.split(separator: ",").compactMap { Double($0) } }
}

/// One camera of a still request.
public struct StillDeviceRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "stillDevice"
    public enum State: String, Codable, Sendable {
        /// Asked; its agent has not answered yet.
        case capturing
        /// Its pictures are written on its host and being copied to the coordinator.
        case collecting
        case stored
        case failed
    }

    public var stillId: String
    public var deviceId: String
    public var nodeId: String
    public var state: State
    public var error: String
    public var awayNs: UInt64

    public init(stillId: String, deviceId: String, nodeId: String, state: State = .capturing, error: String = "", awayNs: UInt64 = 0) {
        self.stillId = stillId
        self.deviceId = deviceId
        self.nodeId = nodeId
        self.state = state
        self.error = error
        self.awayNs = awayNs
    }
}

/// One picture: where its camera's host wrote it, and the coordinator's verified copy.
public struct StillImageRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "stillImage"
    public var stillId: String
    public var deviceId: String
    public var number: Int
    public var fileName: String
    public var agentPath: String
    public var sizeBytes: Int64
    public var sha256: String
    public var mediaType: String
    public var sidecarJson: String
    public var requestedFleetNs: UInt64
    public var fleetTimeNs: UInt64
    public var spreadNs: Int64
    public var ev: Double
    public var width: Int
    public var height: Int
    public var pixelFormat: String
    public var storedPath: String?
    public var storedAt: UnixMilliseconds?

    public init(
        stillId: String, deviceId: String, number: Int, fileName: String, agentPath: String, sizeBytes: Int64, sha256: String,
        mediaType: String, sidecarJson: String, requestedFleetNs: UInt64, fleetTimeNs: UInt64, spreadNs: Int64, ev: Double,
        width: Int, height: Int, pixelFormat: String
    ) {
        self.stillId = stillId
        self.deviceId = deviceId
        self.number = number
        self.fileName = fileName
        self.agentPath = agentPath
        self.sizeBytes = sizeBytes
        self.sha256 = sha256
        self.mediaType = mediaType
        self.sidecarJson = sidecarJson
        self.requestedFleetNs = requestedFleetNs
        self.fleetTimeNs = fleetTimeNs
        self.spreadNs = spreadNs
        self.ev = ev
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
    }
}

/// A still request with its cameras and pictures, as the index holds them.
public struct StillEntry: Sendable, Hashable {
    public var still: StillRecord
    public var devices: [StillDeviceRecord]
    public var images: [StillImageRecord]

    public func images(of deviceID: String) -> [StillImageRecord] {
        images.filter { $0.deviceId == deviceID }.sorted { $0.number < $1.number }
    }
}

/// The stills index (stills.md): every write is one transaction, and a request's audit entry
/// goes with the write that changes it.
extension FleetDatabase {
    /// A new request, its cameras (those refused for consent are stored failed, with why), and
    /// its audit entry.
    public func createStill(_ still: StillRecord, devices: [StillDeviceRecord], audit: AuditEntry) async throws(StoreError) {
        try await write("creating still \(still.id)") { db in
            guard try StillRecord.fetchOne(db, key: still.id) == nil else {
                throw StoreError.refused(reason: "a still with id \(still.id) exists already")
            }
            try still.insert(db)
            for device in devices { try device.insert(db) }
            _ = try audit.inserted(db)
        }
    }

    /// A camera's agent answered: its pictures are written on its host (state collecting), or
    /// it could not take them (failed, with the reason).
    public func recordStillCapture(
        stillID: String, deviceID: String, images: [StillImageRecord], awayNs: UInt64,
        failure: String?
    ) async throws(StoreError) {
        try await write("recording the pictures of \(deviceID) in still \(stillID)") { db in
            guard var device = try StillDeviceRecord.fetchOne(db, key: ["stillId": stillID, "deviceId": deviceID]) else {
                throw StoreError.notFound(what: "\(deviceID) in still \(stillID)")
            }
            for image in images
            where try StillImageRecord.fetchOne(db, key: ["stillId": stillID, "deviceId": deviceID, "number": image.number]) == nil {
                try image.insert(db)
            }
            device.awayNs = awayNs
            if let failure {
                device.state = .failed
                device.error = failure
            } else if device.state == .capturing {
                device.state = images.isEmpty ? .failed : .collecting
                if images.isEmpty { device.error = "its agent wrote no picture" }
            }
            try device.update(db)
        }
    }

    /// What became of pictures an agent reported on its recordings link.
    public enum StillAdoption: Sendable, Equatable {
        /// Indexed now: the camera's answer had not come (too late, or before a restart).
        case adopted
        /// The index had them already (from the answer): nothing to do.
        case alreadyIndexed
        /// The camera's answer is still awaited: it will bring them.
        case awaitingAnswer
        /// No such still, or the camera is not one of its own on that node.
        case unknown
    }

    /// Indexes a camera's pictures its agent reports when the index has none of them yet,
    /// whatever became of the camera's answer: the camera then is `collecting` again, and the
    /// still not yet stored.
    public func adoptStillPictures(
        stillID: String, deviceID: String, nodeID: String, images: [StillImageRecord],
        awayNs: UInt64
    ) async throws(StoreError) -> StillAdoption {
        try await write("adopting the pictures of \(deviceID) in still \(stillID)") { db in
            guard var still = try StillRecord.fetchOne(db, key: stillID),
                var device = try StillDeviceRecord.fetchOne(db, key: ["stillId": stillID, "deviceId": deviceID]), device.nodeId == nodeID
            else {
                return .unknown
            }
            let indexed =
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM stillImage WHERE stillId = ? AND deviceId = ?", arguments: [stillID, deviceID]) ?? 0
            guard indexed == 0 else { return .alreadyIndexed }
            guard device.state != .capturing else { return .awaitingAnswer }
            guard !images.isEmpty else { return .alreadyIndexed }
            for image in images { try image.insert(db) }
            device.state = .collecting
            device.error = ""
            device.awayNs = awayNs
            try device.update(db)
            still.storedAt = nil
            try still.update(db)
            return .adopted
        }
    }

    /// The coordinator holds a verified copy of a picture at `path`; the camera is stored once
    /// all of its pictures are, and the request once every camera is stored or failed.
    public func markStillImageStored(
        stillID: String, deviceID: String, number: Int, path: String,
        at now: UnixMilliseconds
    ) async throws(StoreError) {
        try await write("noting picture \(number) of \(deviceID) in still \(stillID) stored") { db in
            guard var image = try StillImageRecord.fetchOne(db, key: ["stillId": stillID, "deviceId": deviceID, "number": number]) else {
                throw StoreError.notFound(what: "picture \(number) of \(deviceID) in still \(stillID)")
            }
            image.storedPath = path
            image.storedAt = now
            try image.update(db)
            let unstored =
                try Int.fetchOne(
                    db, sql: "SELECT COUNT(*) FROM stillImage WHERE stillId = ? AND deviceId = ? AND storedPath IS NULL",
                    arguments: [stillID, deviceID]) ?? 0
            if unstored == 0, var device = try StillDeviceRecord.fetchOne(db, key: ["stillId": stillID, "deviceId": deviceID]),
                device.state == .collecting
            {
                device.state = .stored
                device.error = ""
                try device.update(db)
            }
            try Self.noteStoredIfComplete(db, stillID: stillID, now: now)
        }
    }

    /// A camera's copying failed (its agent is unreachable, a checksum did not match): said
    /// on the camera, which stays `collecting` so that exporting the still tries again.
    public func noteStillCollectProblem(stillID: String, deviceID: String, problem: String) async throws(StoreError) {
        try await write("noting a problem copying the pictures of \(deviceID) in still \(stillID)") { db in
            guard var device = try StillDeviceRecord.fetchOne(db, key: ["stillId": stillID, "deviceId": deviceID]) else { return }
            device.error = problem
            try device.update(db)
        }
    }

    /// Fails the cameras still capturing (their agent never answered), with `reason`.
    public func failUnansweredStillDevices(stillID: String, reason: String, at now: UnixMilliseconds) async throws(StoreError) {
        try await write("ending the unanswered cameras of still \(stillID)") { db in
            try db.execute(
                sql: "UPDATE stillDevice SET state = 'failed', error = ? WHERE stillId = ? AND state = 'capturing'",
                arguments: [reason, stillID])
            try Self.noteStoredIfComplete(db, stillID: stillID, now: now)
        }
    }

    private static func noteStoredIfComplete(_ db: Database, stillID: String, now: UnixMilliseconds) throws {
        let pending =
            try Int.fetchOne(
                db, sql: "SELECT COUNT(*) FROM stillDevice WHERE stillId = ? AND state IN ('capturing', 'collecting')",
                arguments: [stillID]) ?? 0
        guard pending == 0, var still = try StillRecord.fetchOne(db, key: stillID), still.storedAt == nil else { return }
        still.storedAt = now
        try still.update(db)
    }

    public func still(id: String) async throws(StoreError) -> StillEntry? {
        try await read("reading still \(id)") { db in
            guard let still = try StillRecord.fetchOne(db, key: id) else { return nil }
            return try Self.entry(db, still)
        }
    }

    /// Every still, newest first.
    public func stills(limit: Int = 1000) async throws(StoreError) -> [StillEntry] {
        try await read("listing stills") { db in
            try StillRecord.order(Column("createdAt").desc).limit(limit).fetchAll(db).map { try Self.entry(db, $0) }
        }
    }

    /// Pictures written on the agents and not yet copied, oldest request first (the
    /// coordinator goes on copying them after a restart).
    public func uncollectedStillImages() async throws(StoreError) -> [(image: StillImageRecord, nodeID: String)] {
        try await read("listing pictures not yet copied") { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT stillImage.*, stillDevice.nodeId AS nodeId FROM stillImage
                    JOIN stillDevice USING (stillId, deviceId)
                    WHERE stillImage.storedPath IS NULL AND stillDevice.state = 'collecting'
                    ORDER BY stillImage.stillId, stillImage.deviceId, stillImage.number
                    """)
            return try rows.map { (try StillImageRecord(row: $0), $0["nodeId"] as String) }
        }
    }

    /// Forgets a still and everything under it (the caller removes the files).
    public func deleteStill(id: String, audit: AuditEntry) async throws(StoreError) {
        try await write("deleting still \(id)") { db in
            guard try StillRecord.fetchOne(db, key: id) != nil else { throw StoreError.notFound(what: "still \(id)") }
            _ = try StillRecord.deleteOne(db, key: id)
            _ = try audit.inserted(db)
        }
    }

    private static func entry(_ db: Database, _ still: StillRecord) throws -> StillEntry {
        StillEntry(
            still: still,
            devices: try StillDeviceRecord.filter(Column("stillId") == still.id).order(Column("deviceId")).fetchAll(db),
            images: try StillImageRecord.filter(Column("stillId") == still.id).order(Column("deviceId"), Column("number")).fetchAll(db))
    }
}
