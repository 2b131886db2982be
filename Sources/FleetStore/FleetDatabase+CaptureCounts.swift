import FleetCore
import GRDB

/// What each device captured, as its agents counted (`AgentRunCaptures`), kept across
/// coordinator restarts like the frame counters.
extension FleetDatabase {
    public func captureCounts() async throws(StoreError) -> [String: AgentRunCaptures] {
        try await read("reading the captured-frame counts") { db in
            var counts: [String: AgentRunCaptures] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT * FROM deviceCaptureCount") {
                let count = { (column: String) in UInt64(max(row[column] as Int64, 0)) }
                counts[row["deviceId"]] = AgentRunCaptures(
                    agentInstance: row["agentInstance"],
                    earlierRuns: CaptureTally(frames: count("earlierFrames"), bytes: count("earlierBytes")),
                    currentRun: CaptureTally(frames: count("runFrames"), bytes: count("runBytes")))
            }
            return counts
        }
    }

    /// Stores these counts; devices the fleet no longer has are skipped. Every device's counts
    /// change every few seconds, so the statement is prepared once, not parsed once a device.
    public func saveCaptureCounts(_ counts: [String: AgentRunCaptures]) async throws(StoreError) {
        guard !counts.isEmpty else { return }
        try await write("storing the captured-frame counts") { db in
            let upsert = try db.cachedStatement(
                sql: """
                    INSERT INTO deviceCaptureCount (deviceId, agentInstance, earlierFrames, earlierBytes, runFrames, runBytes)
                    SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM device WHERE id = ?)
                    ON CONFLICT (deviceId) DO UPDATE SET agentInstance = excluded.agentInstance,
                        earlierFrames = excluded.earlierFrames, earlierBytes = excluded.earlierBytes,
                        runFrames = excluded.runFrames, runBytes = excluded.runBytes
                    """)
            for (deviceID, count) in counts {
                try upsert.execute(arguments: [
                    deviceID, count.agentInstance,
                    Int64(clamping: count.earlierRuns.frames), Int64(clamping: count.earlierRuns.bytes),
                    Int64(clamping: count.currentRun.frames), Int64(clamping: count.currentRun.bytes), deviceID,
                ])
            }
        }
    }
}
