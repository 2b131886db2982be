import FleetCore
import Foundation
import GRDB

/// A storage destination (recordings.md, "Offload") as kept: its backend, the settings that
/// are not secret, which settings are (their values are kept apart, DATA/keys/storage), the
/// folder on it takes go under, and who made it.
public struct StorageDestinationRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "storageDestination"
    public var name: String
    public var backend: String
    /// The settings, as a JSON object of strings.
    public var optionsJson: String
    /// The secret settings' names, comma-separated (names hold no commas).
    public var secretKeys: String
    public var root: String
    /// Every take is offloaded here once it is stored.
    public var offloadWhenStopped: Bool
    /// "HH:MM" of the coordinator's local time: each day, every stored take not yet proved here
    /// is offloaded; empty for none.
    public var offloadDailyAt: String
    public var createdAt: UnixMilliseconds
    public var createdBy: String

    public init(
        name: String, backend: String, options: [String: String], secretKeys: [String], root: String, offloadWhenStopped: Bool = false,
        offloadDailyAt: String = "", createdAt: UnixMilliseconds, createdBy: String
    ) {
        self.offloadWhenStopped = offloadWhenStopped
        self.offloadDailyAt = offloadDailyAt
        self.name = name
        self.backend = backend
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        optionsJson = (try? encoder.encode(options)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        self.secretKeys = secretKeys.sorted().joined(separator: ",")
        self.root = root
        self.createdAt = createdAt
        self.createdBy = createdBy
    }

    public var options: [String: String] { (try? JSONDecoder().decode([String: String].self, from: Data(optionsJson.utf8))) ?? [:] }
    public var secretKeyList: [String] { secretKeys.split(separator: ",").map(String.init) }
}

extension FleetDatabase {
    /// Adds the destination, or replaces the one of that name, with its audit entry.
    public func saveStorageDestination(_ destination: StorageDestinationRecord, audit: AuditEntry) async throws(StoreError) {
        try await write("storing storage destination \(destination.name)") { db in
            try destination.save(db)
            _ = try audit.inserted(db)
        }
    }

    /// Removes the destination, with its audit entry; false when there was none of that name.
    public func removeStorageDestination(named name: String, audit: AuditEntry) async throws(StoreError) -> Bool {
        try await write("removing storage destination \(name)") { db in
            guard try StorageDestinationRecord.deleteOne(db, key: name) else { return false }
            _ = try audit.inserted(db)
            return true
        }
    }

    /// Every destination, by name.
    public func storageDestinations() async throws(StoreError) -> [StorageDestinationRecord] {
        try await read("listing the storage destinations") { db in try StorageDestinationRecord.order(Column("name")).fetchAll(db) }
    }

    /// The takes no longer recording that have a finished segment not proved on the destination
    /// (a daily offload's work), oldest first.
    public func takesNotProved(on destination: String) async throws(StoreError) -> [TakeRecord] {
        try await read("finding the takes not yet offloaded to \(destination)") { db in
            try TakeRecord.fetchAll(
                db,
                sql: """
                    SELECT * FROM take WHERE state <> 'recording' AND EXISTS (
                        SELECT 1 FROM segment s WHERE s.takeId = take.id AND s.state <> 'open' AND s.sha256 <> ''
                        AND NOT EXISTS (
                            SELECT 1 FROM segmentCopy c WHERE c.takeId = s.takeId AND c.deviceId = s.deviceId AND c.number = s.number
                            AND c.destination = ? AND c.state = 'verified'))
                    ORDER BY createdAt, id
                    """, arguments: [destination])
        }
    }
}

/// A segment's copy on a storage destination (`recordings offload`): the last attempt's outcome.
public struct SegmentCopyRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "segmentCopy"

    public enum State: String, Codable, Sendable {
        /// The destination holds the segment, proved by its SHA-256.
        case verified
        case failed
        /// Not sent: the device's consent was not granted.
        case heldBack = "held_back"
    }

    public var takeId: String
    public var deviceId: String
    public var number: Int
    public var destination: String
    public var objectPath: String
    public var state: State
    /// store_checksum or read_back (verified copies).
    public var proof: String
    public var sentBytes: Int64
    public var error: String
    /// Who sent it; nil: the coordinator.
    public var nodeId: String?
    public var at: UnixMilliseconds

    public init(
        takeId: String, deviceId: String, number: Int, destination: String, objectPath: String, state: State, proof: String = "",
        sentBytes: Int64 = 0, error: String = "", nodeId: String?, at: UnixMilliseconds
    ) {
        self.takeId = takeId
        self.deviceId = deviceId
        self.number = number
        self.destination = destination
        self.objectPath = objectPath
        self.state = state
        self.proof = proof
        self.sentBytes = sentBytes
        self.error = error
        self.nodeId = nodeId
        self.at = at
    }
}

extension FleetDatabase {
    /// Records a copy's outcome; a verified copy stays verified (a later failed attempt to
    /// prove it again does not unmake the proof the destination gave).
    public func recordSegmentCopy(_ copy: SegmentCopyRecord) async throws(StoreError) {
        try await write("recording the copy of segment \(copy.number) of \(copy.deviceId) on \(copy.destination)") { db in
            let key: [String: any DatabaseValueConvertible] = [
                "takeId": copy.takeId, "deviceId": copy.deviceId, "number": copy.number, "destination": copy.destination,
            ]
            if copy.state != .verified, let kept = try SegmentCopyRecord.fetchOne(db, key: key), kept.state == .verified { return }
            try copy.save(db)
        }
    }

    /// The copies of a take's segments on every destination.
    public func segmentCopies(takeID: String) async throws(StoreError) -> [SegmentCopyRecord] {
        try await read("listing the copies of take \(takeID)") { db in
            try SegmentCopyRecord.filter(Column("takeId") == takeID).order(Column("destination"), Column("deviceId"), Column("number")).fetchAll(db)
        }
    }
}
