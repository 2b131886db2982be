import GRDB

/// A sensor stream a take records (sensors.md, "In takes"): its readings go into the sensor
/// track of the take's cameras' files; the stream has no part of its own.
public struct TakeSensorRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "takeSensor"
    public var takeId: String
    public var deviceId: String
    public var nodeId: String

    public init(takeId: String, deviceId: String, nodeId: String) {
        self.takeId = takeId
        self.deviceId = deviceId
        self.nodeId = nodeId
    }
}

extension FleetDatabase {
    /// The sensor streams of these takes, in the order each take named them.
    public func takeSensors(takeIDs: [String]) async throws(StoreError) -> [TakeSensorRecord] {
        try await read("reading the sensor streams of \(takeIDs.count) take(s)") { db in
            try TakeSensorRecord.filter(takeIDs.contains(Column("takeId"))).order(Column("rowid")).fetchAll(db)
        }
    }
}
