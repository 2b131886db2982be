import FleetCore
import GRDB

/// A node's clock as its agent last reported it (proto-docs/clock.md).
public struct NodeClockRecord: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "nodeClock"
    public var nodeId: String
    /// unsynchronised, synchronising or locked.
    public var sync: String
    /// Agent clock minus fleet time, and the host's system clock minus fleet time, ns.
    public var offsetNs: Int64
    public var wallClockOffsetNs: Int64
    public var driftPpm: Double
    public var uncertaintyNs: Int64
    public var roundTripNs: Int64
    public var coordinatorId: String
    public var reportedAt: UnixMilliseconds

    public init(
        nodeId: String, sync: String, offsetNs: Int64, wallClockOffsetNs: Int64, driftPpm: Double, uncertaintyNs: Int64,
        roundTripNs: Int64, coordinatorId: String, reportedAt: UnixMilliseconds
    ) {
        self.nodeId = nodeId
        self.sync = sync
        self.offsetNs = offsetNs
        self.wallClockOffsetNs = wallClockOffsetNs
        // An agent's number is not trusted to be finite (SQLite keeps NaN as NULL).
        self.driftPpm = driftPpm.isFinite ? driftPpm : 0
        self.uncertaintyNs = max(uncertaintyNs, 0)
        self.roundTripNs = max(roundTripNs, 0)
        self.coordinatorId = coordinatorId
        self.reportedAt = reportedAt
    }
}

extension FleetDatabase {
    /// Stores the latest clock state of each node given; nodes the store does not know are
    /// skipped. Every online node's clock, every few seconds: one statement, prepared once.
    public func saveClocks(_ clocks: [NodeClockRecord]) async throws(StoreError) {
        guard !clocks.isEmpty else { return }
        try await write("storing node clocks") { db in
            let upsert = try db.cachedStatement(
                sql: """
                    INSERT INTO nodeClock (nodeId, sync, offsetNs, wallClockOffsetNs, driftPpm, uncertaintyNs, roundTripNs, coordinatorId, reportedAt)
                    SELECT ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM node WHERE id = ?)
                    ON CONFLICT (nodeId) DO UPDATE SET sync = excluded.sync, offsetNs = excluded.offsetNs,
                        wallClockOffsetNs = excluded.wallClockOffsetNs, driftPpm = excluded.driftPpm,
                        uncertaintyNs = excluded.uncertaintyNs, roundTripNs = excluded.roundTripNs,
                        coordinatorId = excluded.coordinatorId, reportedAt = excluded.reportedAt
                    """)
            for clock in clocks {
                try upsert.execute(arguments: [
                    clock.nodeId, clock.sync, clock.offsetNs, clock.wallClockOffsetNs, clock.driftPpm,
                    clock.uncertaintyNs, clock.roundTripNs, clock.coordinatorId, clock.reportedAt, clock.nodeId,
                ])
            }
        }
    }

    /// The node's clock as last stored; nil if it never reported one.
    public func clock(nodeID: String) async throws(StoreError) -> NodeClockRecord? {
        try await read("reading the clock of \(nodeID)") { db in try NodeClockRecord.fetchOne(db, key: nodeID) }
    }

    public func clocks() async throws(StoreError) -> [String: NodeClockRecord] {
        try await read("reading node clocks") { db in
            Dictionary(try NodeClockRecord.fetchAll(db).map { ($0.nodeId, $0) }, uniquingKeysWith: { first, _ in first })
        }
    }
}
