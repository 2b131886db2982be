import FleetBus
import FleetCore
import FleetStore
import Foundation

/// What an admin can do on the coordinator's own host, with the data directory's files
/// rather than a key: make the first admin, mint enrollment tokens for a scripted install.
/// Whoever can write the data directory owns the fleet anyway; a running coordinator sees
/// the changes at the next handshake (its ZAP handler reads the database).
public enum LocalAdministration {
    /// Adds (or changes) an operator. Without `publicKey` a key pair is made and returned,
    /// for the caller to write into a credential file.
    public static func addOperator(dataDirectory: String, name: String, role: OperatorRole, publicKey: CurvePublicKey?,
                                   by actor: String) async throws -> (keys: CurveKeyPair?, coordinatorKey: CurvePublicKey) {
        guard AccessNames.isValid(name) else { throw LocalAdministrationError(AccessNames.rule) }
        let (store, coordinatorKeys) = try open(dataDirectory)
        let keys = publicKey == nil ? try CurveKeyPair.generate() : nil
        let key = publicKey ?? keys!.publicKey
        let now = Date().unixMilliseconds
        try await store.saveOperator(OperatorRecord(name: name, publicKey: key.z85, role: role.rawValue, addedAt: now, addedBy: actor),
                                     audit: AuditEntry(at: now, actor: actor, action: "operator.add", target: name, outcome: "ok",
                                                       detail: "\(role.rawValue), key \(key.fingerprint)…, on the coordinator's host"))
        return (keys, coordinatorKeys.publicKey)
    }

    /// A one-time enrollment token for an agent to be called `name`.
    public static func createEnrollmentToken(dataDirectory: String, name: String, validSeconds: UInt32,
                                             by actor: String) async throws -> (token: EnrollmentToken, expiresAt: Int64) {
        guard AccessNames.isValid(name) else { throw LocalAdministrationError(AccessNames.rule) }
        let (store, coordinatorKeys) = try open(dataDirectory)
        return try await issueEnrollmentToken(store: store, coordinatorKey: coordinatorKeys.publicKey, name: name,
                                              validSeconds: validSeconds, by: actor, at: Date().unixMilliseconds,
                                              where: ", on the coordinator's host")
    }

    /// Makes a token's key pair and records its public half; the token itself is returned
    /// once and kept nowhere.
    static func issueEnrollmentToken(store: FleetDatabase, coordinatorKey: CurvePublicKey, name: String, validSeconds: UInt32,
                                     by actor: String, at now: UnixMilliseconds,
                                     where place: String = "") async throws -> (token: EnrollmentToken, expiresAt: Int64) {
        let keys = try CurveKeyPair.generate()
        let expires = now + Int64(validSeconds) * 1000
        try await store.createEnrollmentToken(
            EnrollmentTokenRecord(publicKey: keys.publicKey.z85, name: name, createdBy: actor, createdAt: now, expiresAt: expires),
            audit: AuditEntry(at: now, actor: actor, action: "enroll.token", target: name, outcome: "ok",
                              detail: "token \(keys.publicKey.fingerprint)… valid for \(validSeconds) s\(place)"))
        return (EnrollmentToken(keys: keys, coordinatorKey: coordinatorKey), expires)
    }

    /// Puts a backup (from `capfleet backup`) in place as the data directory's fleet
    /// database, with no coordinator running on it. A database already there is kept beside
    /// it as fleet.sqlite.replaced-TIME, and only with `replacing`. Refuses a backup that is
    /// damaged, no fleet database, or from a newer CaptureFleet (its schema has migrations
    /// this binary does not know).
    public static func restore(backup: String, dataDirectory: String, replacing: Bool) throws -> (summary: FleetBackupSummary, replaced: String?) {
        let summary = try FleetDatabase.inspectBackup(at: backup)
        guard !summary.newerThanThisBinary else {
            throw LocalAdministrationError("\(backup) comes from a newer CaptureFleet (schema v\(summary.schemaVersion); this binary knows v\(FleetDatabase.schemaVersion)): restore it with that version or later")
        }
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        let lock = try DataDirectoryLock.acquire(dataDirectory: dataDirectory)
        defer { withExtendedLifetime(lock) {} }
        let database = dataDirectory + "/fleet.sqlite"
        let files = FileManager.default
        var replaced: String?
        if files.fileExists(atPath: database) {
            guard replacing else {
                throw LocalAdministrationError("\(dataDirectory) already has a fleet database: add --replace to keep it aside (as fleet.sqlite.replaced-TIME) and restore over it")
            }
            let aside = database + ".replaced-\(Date().unixMilliseconds)"
            try files.moveItem(atPath: database, toPath: aside)
            for suffix in ["-wal", "-shm"] where files.fileExists(atPath: database + suffix) {
                try files.moveItem(atPath: database + suffix, toPath: aside + suffix)
            }
            replaced = aside
        }
        // Copied beside it, then renamed: a restore cut short leaves no half a database.
        let partial = database + ".restoring"
        try? files.removeItem(atPath: partial)
        try files.copyItem(atPath: backup, toPath: partial)
        try files.moveItem(atPath: partial, toPath: database)
        // The snapshot's own migration lock, if any, means nothing here.
        try? files.removeItem(atPath: database + ".migrate-lock")
        return (summary, replaced)
    }

    private static func open(_ dataDirectory: String) throws -> (FleetDatabase, CurveKeyPair) {
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        let keys = try CoordinatorKeys.loadOrCreate(dataDirectory: dataDirectory)
        let store = try FleetDatabase(path: dataDirectory + "/fleet.sqlite")
        return (store, keys)
    }
}

public struct LocalAdministrationError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
