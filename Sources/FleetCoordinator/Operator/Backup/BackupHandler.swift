import FleetProtocol
import FleetStore
import Foundation
import Logging

/// `capfleet backup`: consistent snapshots of the fleet database, fetched in chunks; each new
/// snapshot is audited.
struct BackupHandler: Sendable {
    let store: FleetDatabase
    let backups: DatabaseBackups
    let clock: CoordinatorClock
    let logger: Logger

    /// A chunk of a consistent snapshot of the fleet database; without an id, a new snapshot.
    func backupDatabase(_ query: Capfleet_V1_BackupDatabase, by caller: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        let snapshot: DatabaseBackups.Snapshot
        if query.backupID.isEmpty {
            snapshot = try await backups.take()
            logger.notice("fleet database backed up", metadata: ["backup": "\(snapshot.id)", "bytes": "\(snapshot.size)", "by": "\(caller)"])
            try await store.appendAudit(
                AuditEntry(
                    at: clock.unixMilliseconds(), actor: caller, action: "database.backup", target: snapshot.id,
                    outcome: "ok", detail: "\(snapshot.size) bytes, schema v\(snapshot.schemaVersion), sha256 \(snapshot.sha256)"))
        } else {
            guard let found = backups.snapshot(query.backupID) else {
                reply.status = .failure(
                    .notFound,
                    "no backup \(query.backupID): it was fetched completely or is older than \(DatabaseBackups.keptSeconds / 60) minutes; start a new one"
                )
                return
            }
            snapshot = found
        }
        let data = try await backups.read(snapshot, offset: query.offset, length: Int(query.length))
        reply.backup = .with {
            $0.backupID = snapshot.id
            $0.size = snapshot.size
            $0.sha256 = snapshot.sha256
            $0.schemaVersion = UInt32(snapshot.schemaVersion)
            $0.takenUnixMs = snapshot.takenUnixMs
            $0.data = data
        }
        reply.status = .ok
    }
}
