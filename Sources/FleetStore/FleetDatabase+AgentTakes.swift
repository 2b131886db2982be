import FleetCore
import GRDB

extension SegmentRecord {
    /// Frames of this segment's span the part does not hold, by reason.
    public var drops: DropTally {
        DropTally(
            late: UInt64(max(dropsLate, 0)), outOfBuffers: UInt64(max(dropsOutOfBuffers, 0)), discontinuity: UInt64(max(dropsDiscontinuity, 0)),
            encoderLate: UInt64(max(dropsEncoderLate, 0)))
    }

    public mutating func setDrops(_ drops: DropTally) {
        dropsLate = Int64(clamping: drops.late)
        dropsOutOfBuffers = Int64(clamping: drops.outOfBuffers)
        dropsDiscontinuity = Int64(clamping: drops.discontinuity)
        dropsEncoderLate = Int64(clamping: drops.encoderLate)
    }

    /// Whether the coordinator can read the file itself: its own, or a collected copy.
    public var readablePath: String? { nodeId == nil ? path : collectedPath }
}

/// The index of takes written by the agents (recordings.md, "Where takes are written"): each
/// agent reports its segments as they close, and the coordinator keeps where they are.
extension FleetDatabase {
    /// Indexes a segment an agent finished (or repaired), and the part's tally as of its
    /// end, in one transaction. Reported again (the agent did not hear the answer), it changes
    /// nothing it already holds: a collected copy stays; a tally older than the newest
    /// segment's is not applied.
    public func indexAgentSegment(_ segment: SegmentRecord, tally: TakeDeviceTally) async throws(StoreError) {
        try await write("indexing segment \(segment.number) of \(segment.deviceId) in \(segment.takeId)") { db in
            guard var device = try TakeDeviceRecord.fetchOne(db, key: ["takeId": segment.takeId, "deviceId": segment.deviceId]) else {
                throw StoreError.notFound(what: "\(segment.deviceId) in take \(segment.takeId)")
            }
            let key: [String: any DatabaseValueConvertible] = ["takeId": segment.takeId, "deviceId": segment.deviceId, "number": segment.number]
            if let existing = try SegmentRecord.fetchOne(db, key: key) {
                var updated = segment
                updated.collectedPath = existing.collectedPath
                updated.collectedAt = existing.collectedAt
                updated.openedAt = existing.openedAt
                try updated.update(db)
            } else {
                try segment.insert(db)
            }
            let newest =
                try Int.fetchOne(
                    db, sql: "SELECT MAX(number) FROM segment WHERE takeId = ? AND deviceId = ?",
                    arguments: [segment.takeId, segment.deviceId]) ?? segment.number
            guard segment.number >= newest else { return }
            device.apply(tally)
            if device.state == .waiting || device.state == .interrupted { device.state = .recording }
            try device.update(db)
        }
    }

    /// The part's segments the index holds, by number (to check an agent's end against).
    public func segmentNumbers(takeID: String, deviceID: String) async throws(StoreError) -> [Int] {
        try await read("reading the segments of \(deviceID) in \(takeID)") { db in
            try Int.fetchAll(db, sql: "SELECT number FROM segment WHERE takeId = ? AND deviceId = ? ORDER BY number", arguments: [takeID, deviceID])
        }
    }

    /// The part's final tally, as its agent counted it when the part ended.
    public func setTakeDeviceTally(takeID: String, deviceID: String, tally: TakeDeviceTally) async throws(StoreError) {
        try await write("setting the tally of \(deviceID) in \(takeID)") { db in
            guard var device = try TakeDeviceRecord.fetchOne(db, key: ["takeId": takeID, "deviceId": deviceID]) else {
                throw StoreError.notFound(what: "\(deviceID) in take \(takeID)")
            }
            device.apply(tally)
            try device.update(db)
        }
    }

    /// A verified copy of an agent-held segment is on the coordinator's disk.
    public func markSegmentCollected(takeID: String, deviceID: String, number: Int, path: String, at: UnixMilliseconds) async throws(StoreError) {
        try await write("marking segment \(number) of \(deviceID) in \(takeID) collected") { db in
            guard var segment = try SegmentRecord.fetchOne(db, key: ["takeId": takeID, "deviceId": deviceID, "number": number]) else {
                throw StoreError.notFound(what: "segment \(number) of \(deviceID) in take \(takeID)")
            }
            segment.collectedPath = path
            segment.collectedAt = at
            try segment.update(db)
        }
    }

    /// Agent-held segments without a copy on the coordinator, of one take or of all.
    public func uncollectedSegments(takeID: String? = nil) async throws(StoreError) -> [SegmentRecord] {
        try await read("finding uncollected segments") { db in
            var request = SegmentRecord.filter(Column("nodeId") != nil && Column("collectedPath") == nil)
            if let takeID { request = request.filter(Column("takeId") == takeID) }
            return try request.order(Column("takeId"), Column("deviceId"), Column("number")).fetchAll(db)
        }
    }

    /// The last collect of the take failed with `error` (empty: it went well).
    public func setCollectError(takeID: String, error: String) async throws(StoreError) {
        try await write("noting the collect of \(takeID)") { db in
            guard var take = try TakeRecord.fetchOne(db, key: takeID) else { throw StoreError.notFound(what: "take \(takeID)") }
            take.collectError = error
            try take.update(db)
        }
    }
}
