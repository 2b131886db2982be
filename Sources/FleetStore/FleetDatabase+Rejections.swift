import GRDB

/// Rejected input per endpoint and reason (security.md, "The ZAP handler"; registration.md and
/// frames.md, "Error handling"), kept across coordinator restarts.
public struct RejectionTotal: Sendable, Equatable {
    public var endpoint: String
    public var reason: String
    public var count: UInt64

    public init(endpoint: String, reason: String, count: UInt64) {
        self.endpoint = endpoint
        self.reason = reason
        self.count = count
    }
}

extension FleetDatabase {
    public func rejectionTotals() async throws(StoreError) -> [RejectionTotal] {
        try await read("reading the rejection counts") { db in
            try Row.fetchAll(db, sql: "SELECT endpoint, reason, count FROM rejectionCount ORDER BY endpoint, reason").map { row in
                RejectionTotal(endpoint: row["endpoint"], reason: row["reason"], count: UInt64(max(row["count"] as Int64, 0)))
            }
        }
    }

    /// Stores these totals; a count never goes down (two flushes may cross).
    public func saveRejectionTotals(_ totals: [RejectionTotal]) async throws(StoreError) {
        guard !totals.isEmpty else { return }
        try await write("storing the rejection counts") { db in
            for total in totals {
                try db.execute(
                    sql: """
                        INSERT INTO rejectionCount (endpoint, reason, count) VALUES (?, ?, ?)
                        ON CONFLICT (endpoint, reason) DO UPDATE SET count = MAX(count, excluded.count)
                        """, arguments: [total.endpoint, total.reason, Int64(clamping: total.count)])
            }
        }
    }
}
