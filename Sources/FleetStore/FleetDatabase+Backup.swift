import FleetCore
import FleetSystem
import Foundation
import GRDB

/// What a backup of the fleet database holds, as `FleetDatabase.inspectBackup(at:)` reads it.
public struct FleetBackupSummary: Sendable, Equatable {
    /// Migrations applied in the backup, and whether this binary knows every one of them.
    public var schemaVersion: Int
    public var newerThanThisBinary: Bool
    public var nodes: Int
    public var takes: Int
    public var auditEntries: Int
}

extension FleetDatabase {
    /// Migrations this binary knows: the schema version it writes.
    public static var schemaVersion: Int { FleetSchema.migrator.migrations.count }

    /// A consistent copy of the database at `destination`, taken while the coordinator goes
    /// on reading and writing (SQLite's online backup; writers wait for the copy's last
    /// step only). Returns the copy's schema version. Blocking: runs on a thread of its own.
    public func backup(to destination: String) async throws(StoreError) -> Int {
        let writer = self.writer, path = self.path
        let outcome = await OwnedThread.run("cf-backup") { () -> Result<Int, StoreError> in
            do {
                try? FileManager.default.removeItem(atPath: destination)
                let copy = try DatabaseQueue(path: destination)
                try writer.backup(to: copy)
                let version = try copy.read { try FleetSchema.migrator.appliedMigrations($0).count }
                try copy.close()
                return .success(version)
            } catch {
                try? FileManager.default.removeItem(atPath: destination)
                return .failure(.queryFailed(operation: "backing up to \(destination)", path: path, underlying: error))
            }
        }
        return try outcome.get()
    }

    /// Reads a backup file without changing it: SQLite's integrity check, then what it holds.
    /// Throws if the file is no intact CaptureFleet database.
    public static func inspectBackup(at path: String) throws(StoreError) -> FleetBackupSummary {
        do {
            var configuration = Configuration()
            configuration.readonly = true
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            return try queue.read { db throws(StoreError) -> FleetBackupSummary in
                do {
                    let check = try String.fetchAll(db, sql: "PRAGMA integrity_check")
                    guard check == ["ok"] else {
                        throw StoreError.refused(reason: "\(path) fails SQLite's integrity check: \(check.prefix(3).joined(separator: "; "))")
                    }
                    guard try db.tableExists("grdb_migrations"), try db.tableExists("node") else {
                        throw StoreError.refused(reason: "\(path) is an SQLite file but no CaptureFleet fleet database")
                    }
                    let applied = try FleetSchema.migrator.appliedIdentifiers(db)
                    let known = Set(FleetSchema.migrator.migrations)
                    func count(_ table: String) throws -> Int {
                        try db.tableExists(table) ? Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0 : 0
                    }
                    return FleetBackupSummary(
                        schemaVersion: applied.count, newerThanThisBinary: !applied.isSubset(of: known),
                        nodes: try count("node"), takes: try count("take"), auditEntries: try count("auditLog"))
                } catch let error as StoreError {
                    throw error
                } catch {
                    throw StoreError.refused(
                        reason: "\(path) is no readable SQLite database, so no backup of a fleet (\(error)); take one with `capfleet backup`")
                }
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.refused(
                reason: "\(path) is no readable SQLite database, so no backup of a fleet (\(error)); take one with `capfleet backup`")
        }
    }
}
