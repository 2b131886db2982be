import FleetCore
import Foundation
import GRDB

/// A take as the index keeps it.
public struct TakeRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "take"
    public enum State: String, Codable, Sendable { case recording, stopped, failed }
    public var id: String
    public var name: String
    public var state: State
    /// Fleet time of the take's first instant; the files' timestamps count from it.
    public var startFleetNs: UInt64
    public var stopFleetNs: UInt64?
    public var directory: String
    public var createdAt: UnixMilliseconds
    public var createdBy: String
    public var stoppedAt: UnixMilliseconds?
    public var error: String
    /// Where its parts are written: by the coordinator, or by each device's agent.
    public var store: Store = .coordinator
    /// Why the last collect of its agent-held segments failed, if it did.
    public var collectError = ""
    /// How its raw cameras are stored (recordings.md, "Codecs").
    public var codec: VideoCodec = .raw
    public var quality: Int?
    public var bitrate = 0
    public var gop = 0
    public var stabilisation = VideoStabilisation.off
    /// How long before its instant it starts, from what the agents kept (recordings.md,
    /// "Pre-roll"): `startFleetNs` is the earlier time.
    public var preRollMs = 0

    public var encoding: TakeEncoding {
        get { TakeEncoding(codec: codec, quality: quality, bitrate: bitrate, gop: gop, stabilisation: stabilisation) }
        set {
            codec = newValue.codec
            quality = newValue.quality
            bitrate = newValue.bitrate
            gop = newValue.gop
            stabilisation = newValue.stabilisation
        }
    }

    public enum Store: String, Codable, Sendable { case coordinator, agent }

    public init(id: String, name: String, startFleetNs: UInt64, directory: String, createdAt: UnixMilliseconds, createdBy: String) {
        self.id = id
        self.name = name
        state = .recording
        self.startFleetNs = startFleetNs
        self.directory = directory
        self.createdAt = createdAt
        self.createdBy = createdBy
        error = ""
    }
}

/// One device of a take, with everything it accounts for: frames stored, drops by reason.
public struct TakeDeviceRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "takeDevice"
    public enum State: String, Codable, Sendable { case waiting, recording, interrupted, stopped, failed }
    public var takeId: String
    public var deviceId: String
    public var nodeId: String
    public var state: State
    public var pixelFormat = ""
    public var width = 0
    public var height = 0
    public var frameRate = 0.0
    public var firstFleetNs: UInt64?
    public var lastFleetNs: UInt64?
    public var firstSequence: UInt64?
    public var lastSequence: UInt64?
    public var frames: Int64 = 0
    public var bytes: Int64 = 0
    public var dropsLate: Int64 = 0
    public var dropsOutOfBuffers: Int64 = 0
    public var dropsDiscontinuity: Int64 = 0
    public var dropsEncoderLate: Int64 = 0
    /// The encoder that wrote the part (ffv1, libx264, …); empty: stored as captured.
    public var encoder = ""
    /// An encoded part's camera format (YUYV, NV12, …).
    public var sourcePixelFormat = ""
    /// A codec of the part's own (`record start --codec-for`); nil: the take's.
    public var codec: VideoCodec?
    public var quality: Int?
    public var bitrate = 0
    public var gop = 0
    public var stabilisation = VideoStabilisation.off
    /// As recorded (frames.md, "Colour and depth"): significant bits per sample, the colour
    /// description (`primaries/transfer/matrix/range`, empty: not declared), depth's unit.
    public var bitDepth = 8
    public var colour = ""
    public var depthUnitMetres: Double?

    /// The part's own encoding, if it was given one.
    public var ownEncoding: TakeEncoding? {
        get { codec.map { TakeEncoding(codec: $0, quality: quality, bitrate: bitrate, gop: gop, stabilisation: stabilisation) } }
        set {
            codec = newValue?.codec
            quality = newValue?.quality
            bitrate = newValue?.bitrate ?? 0
            gop = newValue?.gop ?? 0
            stabilisation = newValue?.stabilisation ?? .off
        }
    }
    /// The agent process the part's frames last came from.
    public var agentInstance = ""
    /// Take sequence = the device's sequence + this (wrapping): non-zero after an agent restart.
    public var sequenceOffset: Int64 = 0
    /// Why the part ended: stopped, consent denied, …; empty while it records.
    public var endReason = ""
    /// Frames captured before a denial that consent kept on the agent's host.
    public var withheldFrames: Int64 = 0

    public init(takeId: String, deviceId: String, nodeId: String) {
        self.takeId = takeId
        self.deviceId = deviceId
        self.nodeId = nodeId
        state = .waiting
    }

    public var drops: DropTally {
        DropTally(
            late: UInt64(dropsLate), outOfBuffers: UInt64(dropsOutOfBuffers), discontinuity: UInt64(dropsDiscontinuity),
            encoderLate: UInt64(max(dropsEncoderLate, 0)))
    }

    public mutating func setDrops(_ drops: DropTally) {
        dropsLate = Int64(clamping: drops.late)
        dropsOutOfBuffers = Int64(clamping: drops.outOfBuffers)
        dropsDiscontinuity = Int64(clamping: drops.discontinuity)
        dropsEncoderLate = Int64(clamping: drops.encoderLate)
    }
}

extension TakeDeviceRecord {
    /// What the index holds of the part, as its recorder counts it (a recorder going on
    /// with the part after a restart starts from this).
    public var tally: TakeDeviceTally {
        TakeDeviceTally(
            pixelFormat: pixelFormat, width: width, height: height, frameRate: frameRate, firstFleetNs: firstFleetNs, lastFleetNs: lastFleetNs,
            firstSequence: firstSequence, lastSequence: lastSequence, frames: frames, bytes: bytes, drops: drops, encoder: encoder,
            sourcePixelFormat: sourcePixelFormat, bitDepth: bitDepth, colour: ColourDescription(colour), depthUnitMetres: depthUnitMetres)
    }

    public mutating func apply(_ tally: TakeDeviceTally) {
        pixelFormat = tally.pixelFormat
        width = tally.width
        height = tally.height
        frameRate = tally.frameRate
        firstFleetNs = tally.firstFleetNs
        lastFleetNs = tally.lastFleetNs
        firstSequence = tally.firstSequence
        lastSequence = tally.lastSequence
        frames = tally.frames
        bytes = tally.bytes
        setDrops(tally.drops)
        bitDepth = tally.bitDepth
        colour = tally.colour?.description ?? ""
        depthUnitMetres = tally.depthUnitMetres
        // A part's encoder is kept once known: a tally of a segment stored as captured (a
        // compressed camera) does not name one.
        if !tally.encoder.isEmpty {
            encoder = tally.encoder
            sourcePixelFormat = tally.sourcePixelFormat
        }
    }
}

/// One Matroska file: a device's segment of a take.
public struct SegmentRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "segment"
    public enum State: String, Codable, Sendable { case open, finished, repaired }
    public var takeId: String
    public var deviceId: String
    public var number: Int
    public var path: String
    public var state: State
    public var sizeBytes: Int64 = 0
    public var sha256 = ""
    public var firstFleetNs: UInt64?
    public var lastFleetNs: UInt64?
    public var firstSequence: UInt64?
    public var lastSequence: UInt64?
    public var frames: Int64 = 0
    public var openedAt: UnixMilliseconds
    public var closedAt: UnixMilliseconds?
    /// The node whose disk holds the file at `path`; nil: the coordinator's own.
    public var nodeId: String?
    /// The coordinator's verified copy of an agent-held segment.
    public var collectedPath: String?
    public var collectedAt: UnixMilliseconds?
    public var dropsLate: Int64 = 0
    public var dropsOutOfBuffers: Int64 = 0
    public var dropsDiscontinuity: Int64 = 0
    public var dropsEncoderLate: Int64 = 0

    public init(takeId: String, deviceId: String, number: Int, path: String, openedAt: UnixMilliseconds) {
        self.takeId = takeId
        self.deviceId = deviceId
        self.number = number
        self.path = path
        state = .open
        self.openedAt = openedAt
    }
}

/// A timed-metadata entry of a take, at its fleet time.
public struct TakeEventRecord: Codable, Sendable, Hashable, FetchableRecord, MutablePersistableRecord {
    public static let databaseTableName = "takeEvent"
    public var id: Int64?
    public var takeId: String
    public var deviceId: String
    public var fleetNs: UInt64
    public var kind: String
    /// One JSON object.
    public var detail: String

    public init(takeId: String, deviceId: String = "", fleetNs: UInt64, kind: String, detail: String = "{}") {
        self.takeId = takeId
        self.deviceId = deviceId
        self.fleetNs = fleetNs
        self.kind = kind
        self.detail = detail
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

extension FleetDatabase {
    /// Starts a take: its row, one per device, what it must keep to (recordings.md, "Sync and
    /// integrity") and the audit entry, in one transaction.
    public func createTake(
        _ take: TakeRecord, devices: [TakeDeviceRecord], sensors: [TakeSensorRecord] = [], requirements: TakeRequirements = TakeRequirements(),
        audit: AuditEntry
    ) async throws(StoreError) {
        try await write("creating take \(take.id)") { db in
            guard try TakeRecord.fetchOne(db, key: take.id) == nil else { throw StoreError.refused(reason: "a take named \(take.id) exists already") }
            try take.insert(db)
            for device in devices { try device.insert(db) }
            for sensor in sensors { try sensor.insert(db) }
            try TakeSyncRecord(takeId: take.id, requirements: requirements).insert(db)
            _ = try audit.inserted(db)
        }
    }

    /// Opens a segment: its row says 'open' until `finishSegment`, so a crash leaves a trail.
    public func openSegment(_ segment: SegmentRecord) async throws(StoreError) {
        try await write("opening segment \(segment.number) of \(segment.deviceId) in \(segment.takeId)") { db in
            try segment.insert(db)
        }
    }

    /// Closes a segment with what its file holds, and sets the device's tally, in one
    /// transaction: after every segment, index and files agree.
    public func finishSegment(_ segment: SegmentRecord, tally: TakeDeviceTally) async throws(StoreError) {
        try await write("finishing segment \(segment.number) of \(segment.deviceId) in \(segment.takeId)") { db in
            guard try SegmentRecord.fetchOne(db, key: ["takeId": segment.takeId, "deviceId": segment.deviceId, "number": segment.number]) != nil,
                var device = try TakeDeviceRecord.fetchOne(db, key: ["takeId": segment.takeId, "deviceId": segment.deviceId])
            else {
                throw StoreError.notFound(what: "segment \(segment.number) of \(segment.deviceId) in \(segment.takeId)")
            }
            try segment.update(db)
            device.apply(tally)
            if device.state == .waiting { device.state = .recording }
            try device.update(db)
        }
    }

    public func updateTakeDevice(_ device: TakeDeviceRecord) async throws(StoreError) {
        try await write("updating \(device.deviceId) in \(device.takeId)") { db in try device.update(db) }
    }

    /// Ends a take (stopped, or failed with `error`), with its audit entry.
    public func endTake(
        id: String, state: TakeRecord.State, stopFleetNs: UInt64?, at: UnixMilliseconds, error: String = "",
        audit: AuditEntry
    ) async throws(StoreError) {
        try await write("ending take \(id)") { db in
            guard var take = try TakeRecord.fetchOne(db, key: id) else { throw StoreError.notFound(what: "take \(id)") }
            take.state = state
            take.stopFleetNs = stopFleetNs
            take.stoppedAt = at
            take.error = error
            try take.update(db)
            _ = try audit.inserted(db)
        }
    }

    public func recordTakeEvent(_ event: TakeEventRecord) async throws(StoreError) {
        try await write("recording a \(event.kind) event of \(event.takeId)") { db in
            var event = event
            try event.insert(db)
        }
    }

    /// Takes with a device whose part has not ended (recording, waiting, interrupted): the
    /// ones a restarted coordinator goes on with.
    public func unfinishedTakes() async throws(StoreError) -> [(take: TakeRecord, devices: [TakeDeviceRecord], segments: [SegmentRecord])] {
        try await read("finding takes in progress") { db in
            let devices = try TakeDeviceRecord.filter(["waiting", "recording", "interrupted"].contains(Column("state"))).fetchAll(db)
            return try Dictionary(grouping: devices, by: \.takeId).keys.sorted().compactMap { id in
                guard let take = try TakeRecord.fetchOne(db, key: id) else { return nil }
                let segments = try SegmentRecord.filter(Column("takeId") == id).order(Column("deviceId"), Column("number")).fetchAll(db)
                return (take, devices.filter { $0.takeId == id }, segments)
            }
        }
    }

    public func takeDevice(takeID: String, deviceID: String) async throws(StoreError) -> TakeDeviceRecord? {
        try await read("reading \(deviceID) in take \(takeID)") { db in
            try TakeDeviceRecord.fetchOne(db, key: ["takeId": takeID, "deviceId": deviceID])
        }
    }

    /// Changes a device's row of a take in one transaction (state, agent, how it ended).
    public func modifyTakeDevice(
        takeID: String, deviceID: String, _ change: @escaping @Sendable (inout TakeDeviceRecord) -> Void
    ) async throws(StoreError) {
        try await write("updating \(deviceID) in take \(takeID)") { db in
            guard var device = try TakeDeviceRecord.fetchOne(db, key: ["takeId": takeID, "deviceId": deviceID]) else {
                throw StoreError.notFound(what: "\(deviceID) in take \(takeID)")
            }
            change(&device)
            try device.update(db)
        }
    }

    /// A take that cannot go on (a full disk): it keeps what was written and says why.
    public func failTake(id: String, error: String, at: UnixMilliseconds) async throws(StoreError) {
        try await write("failing take \(id)") { db in
            guard var take = try TakeRecord.fetchOne(db, key: id), take.state == .recording else { return }
            take.state = .failed
            take.error = error
            take.stoppedAt = at
            try take.update(db)
        }
    }

    /// Sets when a take stops (before its devices have all ended).
    public func setTakeStop(id: String, stopFleetNs: UInt64, audit: AuditEntry) async throws(StoreError) {
        try await write("stopping take \(id)") { db in
            guard var take = try TakeRecord.fetchOne(db, key: id) else { throw StoreError.notFound(what: "take \(id)") }
            take.stopFleetNs = stopFleetNs
            try take.update(db)
            _ = try audit.inserted(db)
        }
    }

    /// Every take, newest first.
    public func takes() async throws(StoreError) -> [TakeRecord] {
        try await read("listing takes") { db in try TakeRecord.order(Column("createdAt").desc, Column("id").desc).fetchAll(db) }
    }

    public func take(id: String) async throws(StoreError) -> TakeRecord? {
        try await read("reading take \(id)") { db in try TakeRecord.fetchOne(db, key: id) }
    }

    public func takeDevices(takeID: String) async throws(StoreError) -> [TakeDeviceRecord] {
        try await read("reading the devices of take \(takeID)") { db in
            try TakeDeviceRecord.filter(Column("takeId") == takeID).order(Column("deviceId")).fetchAll(db)
        }
    }

    /// A take's segments in device and number order.
    public func segments(takeID: String) async throws(StoreError) -> [SegmentRecord] {
        try await read("reading the segments of take \(takeID)") { db in
            try SegmentRecord.filter(Column("takeId") == takeID).order(Column("deviceId"), Column("number")).fetchAll(db)
        }
    }

    /// Segments left open (a crash while they were written): the ones to repair at start.
    public func openSegments() async throws(StoreError) -> [SegmentRecord] {
        try await read("finding open segments") { db in try SegmentRecord.filter(Column("state") == "open").fetchAll(db) }
    }

    public func takeEvents(takeID: String) async throws(StoreError) -> [TakeEventRecord] {
        try await read("reading the events of take \(takeID)") { db in
            try TakeEventRecord.filter(Column("takeId") == takeID).order(Column("fleetNs"), Column("id")).fetchAll(db)
        }
    }

    /// Forgets a take and everything indexed under it (the caller deletes the files). Refused
    /// while it is recording.
    public func deleteTake(id: String, audit: AuditEntry) async throws(StoreError) {
        try await write("deleting take \(id)") { db in
            guard let take = try TakeRecord.fetchOne(db, key: id) else { throw StoreError.notFound(what: "take \(id)") }
            guard take.state != .recording else {
                throw StoreError.refused(reason: "take \(id) is still recording: stop it first (capfleet record stop \(id))")
            }
            _ = try TakeRecord.deleteOne(db, key: id)
            _ = try audit.inserted(db)
        }
    }
}

extension FleetDatabase {
    /// Indexes a segment repaired after a crash (SegmentRepair) and adds what its file holds
    /// (frames, and the drops its sequence markers report) to the device's tally, in one
    /// transaction.
    public func recordRepairedSegment(_ segment: SegmentRecord, dropped: DropTally) async throws(StoreError) {
        try await write("indexing repaired segment \(segment.number) of \(segment.deviceId) in \(segment.takeId)") { db in
            guard var device = try TakeDeviceRecord.fetchOne(db, key: ["takeId": segment.takeId, "deviceId": segment.deviceId]) else {
                throw StoreError.notFound(what: "\(segment.deviceId) in take \(segment.takeId)")
            }
            var repaired = segment
            repaired.state = .repaired
            try repaired.update(db)
            device.frames += segment.frames
            if device.firstFleetNs == nil { device.firstFleetNs = segment.firstFleetNs }
            if let last = segment.lastFleetNs { device.lastFleetNs = max(device.lastFleetNs ?? 0, last) }
            if device.firstSequence == nil { device.firstSequence = segment.firstSequence }
            if let last = segment.lastSequence { device.lastSequence = max(device.lastSequence ?? 0, last) }
            device.setDrops(device.drops.adding(dropped))
            try device.update(db)
        }
    }

    /// A finished segment's SHA-256, computed after it was indexed. A segment deleted since
    /// (its take was) is no error.
    public func setSegmentChecksum(takeID: String, deviceID: String, number: Int, sha256: String) async throws(StoreError) {
        try await write("checksumming segment \(number) of \(deviceID) in \(takeID)") { db in
            guard var segment = try SegmentRecord.fetchOne(db, key: ["takeId": takeID, "deviceId": deviceID, "number": number]) else { return }
            segment.sha256 = sha256
            try segment.update(db)
        }
    }

    /// Finished segments without a checksum (the coordinator stopped before it was computed).
    public func segmentsWithoutChecksum() async throws(StoreError) -> [SegmentRecord] {
        try await read("finding segments without a checksum") { db in
            try SegmentRecord.filter(Column("state") != "open" && Column("sha256") == "").fetchAll(db)
        }
    }

    /// Forgets a segment whose file never reached the disk (a crash before its header).
    public func forgetSegment(takeID: String, deviceID: String, number: Int) async throws(StoreError) {
        try await write("forgetting segment \(number) of \(deviceID) in \(takeID)") { db in
            _ = try SegmentRecord.deleteOne(db, key: ["takeId": takeID, "deviceId": deviceID, "number": number])
        }
    }
}
