import FleetBus
import FleetCore
import FleetHTTP
import FleetStore
import Foundation

/// What an admin can do on the coordinator's own host, with the data directory's files
/// rather than a key: make the first admin, mint enrollment tokens for a scripted install.
/// Whoever can write the data directory owns the fleet anyway; a running coordinator sees
/// the changes at the next handshake (its ZAP handler reads the database).
public enum LocalAdministration {
    /// Adds (or changes) an operator. Without `publicKey` a key pair is made and returned,
    /// for the caller to write into a credential file.
    public static func addOperator(
        dataDirectory: String, name: String, role: OperatorRole, publicKey: CurvePublicKey?,
        by actor: String, clock: WallClock = .system
    ) async throws -> (keys: CurveKeyPair?, coordinatorKey: CurvePublicKey) {
        guard AccessNames.isValid(name) else { throw LocalAdministrationError(AccessNames.rule) }
        let (store, coordinatorKeys) = try open(dataDirectory)
        let keys = publicKey == nil ? try CurveKeyPair.generate() : nil
        let key = publicKey ?? keys!.publicKey
        let now = clock.unixMilliseconds()
        try await store.saveOperator(
            OperatorRecord(name: name, publicKey: key.z85, role: role.rawValue, addedAt: now, addedBy: actor),
            audit: AuditEntry(
                at: now, actor: actor, action: "operator.add", target: name, outcome: "ok",
                detail: "\(role.rawValue), key \(key.fingerprint)…, on the coordinator's host"))
        return (keys, coordinatorKeys.publicKey)
    }

    /// An enrollment token for one agent to be called `name`, or for `spec.uses` agents
    /// named by its prefix.
    public static func createEnrollmentToken(
        dataDirectory: String, spec: EnrollmentTokenSpec, validSeconds: UInt32,
        by actor: String, clock: WallClock = .system
    ) async throws -> (token: EnrollmentToken, expiresAt: Int64) {
        let (store, coordinatorKeys) = try open(dataDirectory)
        return try await issueEnrollmentToken(
            store: store, coordinatorKey: coordinatorKeys.publicKey, spec: spec,
            validSeconds: validSeconds, by: actor, at: clock.unixMilliseconds(),
            where: ", on the coordinator's host")
    }

    /// A one-time enrollment token for an agent to be called `name`.
    public static func createEnrollmentToken(
        dataDirectory: String, name: String, validSeconds: UInt32,
        by actor: String, clock: WallClock = .system
    ) async throws -> (token: EnrollmentToken, expiresAt: Int64) {
        let spec: EnrollmentTokenSpec
        do {
            spec = try EnrollmentTokenSpec(name: name, namePrefix: "", uses: 1)
        } catch {
            throw LocalAdministrationError(AccessNames.rule)
        }
        return try await createEnrollmentToken(dataDirectory: dataDirectory, spec: spec, validSeconds: validSeconds, by: actor, clock: clock)
    }

    /// Enrollment tokens with their uses, read from the data directory (`capfleet enroll
    /// list --data`).
    public static func enrollmentTokens(
        dataDirectory: String, includeClosed: Bool, clock: WallClock = .system
    ) async throws -> [EnrollmentTokenSummary] {
        let (store, _) = try open(dataDirectory)
        return try await store.enrollmentTokens(includeClosed: includeClosed, at: clock.unixMilliseconds())
    }

    /// Makes a token's key pair and records its public half; the token itself is returned
    /// once and kept nowhere.
    static func issueEnrollmentToken(
        store: FleetDatabase, coordinatorKey: CurvePublicKey, spec: EnrollmentTokenSpec, validSeconds: UInt32,
        by actor: String, at now: UnixMilliseconds,
        where place: String = ""
    ) async throws -> (token: EnrollmentToken, expiresAt: Int64) {
        let keys = try CurveKeyPair.generate()
        let expires = now + Int64(validSeconds) * 1000
        let record = EnrollmentTokenRecord(publicKey: keys.publicKey.z85, spec: spec, createdBy: actor, createdAt: now, expiresAt: expires)
        let admits =
            switch spec.naming {
            case .fixed: "one agent"
            case let .prefix(prefix): "\(spec.uses) agent(s) named \(prefix)N or by themselves"
            }
        try await store.createEnrollmentToken(
            record,
            audit: AuditEntry(
                at: now, actor: actor, action: "enroll.token", target: record.name, outcome: "ok",
                detail: "token \(keys.publicKey.fingerprint)… for \(admits), valid for \(validSeconds) s\(place)"))
        return (EnrollmentToken(keys: keys, coordinatorKey: coordinatorKey), expires)
    }

    /// Puts a backup (from `capfleet backup`) in place as the data directory's fleet
    /// database, with no coordinator running on it. A database already there is kept beside
    /// it as fleet.sqlite.replaced-TIME, and only with `replacing`. Refuses a backup that is
    /// damaged, no fleet database, or from a newer CaptureFleet (its schema has migrations
    /// this binary does not know).
    /// `copied` hears how many of the backup's bytes are in place, as they are.
    public static func restore(
        backup: String, dataDirectory: String, replacing: Bool,
        clock: WallClock = .system, copied: (_ done: UInt64, _ total: UInt64) -> Void = { _, _ in }
    ) throws -> (summary: FleetBackupSummary, replaced: String?) {
        let summary = try FleetDatabase.inspectBackup(at: backup)
        guard !summary.newerThanThisBinary else {
            throw LocalAdministrationError(
                "\(backup) comes from a newer CaptureFleet (schema v\(summary.schemaVersion); this binary knows v\(FleetDatabase.schemaVersion)): restore it with that version or later"
            )
        }
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        let lock = try DataDirectoryLock.acquire(dataDirectory: dataDirectory)
        defer { withExtendedLifetime(lock) {} }
        let database = dataDirectory + "/fleet.sqlite"
        let files = FileManager.default
        var replaced: String?
        if files.fileExists(atPath: database) {
            guard replacing else {
                throw LocalAdministrationError(
                    "\(dataDirectory) already has a fleet database: add --replace to keep it aside (as fleet.sqlite.replaced-TIME) and restore over it"
                )
            }
            let aside = database + ".replaced-\(clock.unixMilliseconds())"
            try files.moveItem(atPath: database, toPath: aside)
            for suffix in ["-wal", "-shm"] where files.fileExists(atPath: database + suffix) {
                try files.moveItem(atPath: database + suffix, toPath: aside + suffix)
            }
            replaced = aside
        }
        // Copied beside it, then renamed: a restore cut short leaves no half a database.
        let partial = database + ".restoring"
        try? files.removeItem(atPath: partial)
        try copy(backup, to: partial, copied: copied)
        try files.moveItem(atPath: partial, toPath: database)
        // The snapshot's own migration lock, if any, means nothing here.
        try? files.removeItem(atPath: database + ".migrate-lock")
        return (summary, replaced)
    }

    /// Copies a file in 4 MiB pieces, saying how far it is, and makes it durable before the
    /// rename that puts it in place. Both files are closed whatever happens.
    private static func copy(_ source: String, to destination: String, copied: (UInt64, UInt64) -> Void) throws {
        let total = ((try? FileManager.default.attributesOfItem(atPath: source)[.size]) as? NSNumber)?.uint64Value ?? 0
        guard let input = FileHandle(forReadingAtPath: source) else { throw LocalAdministrationError("cannot read \(source)") }
        defer { try? input.close() }
        guard FileManager.default.createFile(atPath: destination, contents: nil), let output = FileHandle(forWritingAtPath: destination) else {
            throw LocalAdministrationError("cannot write \(destination): check that the data directory is writable")
        }
        var done: UInt64 = 0
        do {
            while let piece = try input.read(upToCount: 4 << 20), !piece.isEmpty {
                try output.write(contentsOf: piece)
                done += UInt64(piece.count)
                copied(done, max(total, done))
            }
            try output.synchronize()
        } catch {
            // The copy's failure is the one to report; the half-written file is left for the next try to replace.
            try? output.close()
            throw error
        }
        try output.close()
        copied(done, done)
    }

    /// The coordinator data directory `named` means. A folder that holds a fleet database is
    /// one; `capfleet dev`'s folder may be named for its coordinator's (`DIR/coordinator`).
    /// Anything else is refused, saying where a fleet database was found nearby, unless
    /// `newFleet` says to make a new coordinator's keys and database there: a token or an
    /// operator written into a folder no coordinator uses would be for a fleet that does not exist.
    public static func dataDirectory(named: String, newFleet: Bool) throws(LocalAdministrationError) -> String {
        let files = FileManager.default
        func holdsFleet(_ directory: String) -> Bool { files.fileExists(atPath: directory + "/fleet.sqlite") }
        if holdsFleet(named) { return named }
        let devCoordinator = named + "/coordinator"
        if holdsFleet(devCoordinator) { return devCoordinator }
        if newFleet {
            // A coordinator starting there meanwhile has made some of its own files already.
            let coordinatorsOwn = ["keys", "fleet.sqlite", "coordinator-id", "coordinator.lock", "recordings", "backups"]
            let entries = (try? files.contentsOfDirectory(atPath: named)) ?? []
            if let stranger = entries.first(where: { entry in !coordinatorsOwn.contains { entry.hasPrefix($0) } }) {
                throw LocalAdministrationError(
                    "\(named) holds \(stranger) and no fleet: a new coordinator's data directory should be a folder of its own")
            }
            return named
        }
        let parent = (named as NSString).deletingLastPathComponent
        let nearby = [parent, parent + "/coordinator"].filter { !$0.isEmpty && $0 != named && holdsFleet($0) }
        let hint = nearby.first.map { " A fleet database is in \($0): use --data \($0)." } ?? ""
        throw LocalAdministrationError(
            "\(named) holds no fleet database (fleet.sqlite), so it is no coordinator's data directory.\(hint) To start a new fleet's coordinator there, add --new-fleet (or start the coordinator with --data \(named) first)."
        )
    }

    private static func open(_ dataDirectory: String) throws -> (FleetDatabase, CurveKeyPair) {
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        let keys = try CoordinatorKeys.loadOrCreate(dataDirectory: dataDirectory)
        let store = try FleetDatabase(path: dataDirectory + "/fleet.sqlite")
        return (store, keys)
    }
}

public struct LocalAdministrationError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}

extension LocalAdministration {
    /// A one-time dashboard sign-in path (`/signin?token=…`) for `operatorName`, made on the
    /// coordinator's host from its data directory (what `capfleet dev` prints for its admin).
    public static func createDashboardSignIn(
        dataDirectory: String, operatorName: String, by actor: String, clock: WallClock = .system
    ) async throws -> String {
        let (store, _) = try open(dataDirectory)
        let token = WebSecret.make()
        let now = clock.unixMilliseconds()
        let expires = now + DashboardAccess.signInLinkLifetime
        try await store.addDashboardSignIn(
            DashboardSignInRecord(tokenHash: WebSecret.hash(token), operatorName: operatorName, createdAt: now, expiresAt: expires, createdBy: actor),
            audit: AuditEntry(
                at: now, actor: actor, action: "dashboard.link", target: operatorName, outcome: "ok",
                detail: "a one-time sign-in link, on the coordinator's host, valid until \(expires)"))
        return "/signin?token=\(token)"
    }
}

extension LocalAdministration {
    /// Takes still recording in the coordinator's index, oldest first: what `capfleet dev`
    /// names when it stops, since each goes on when the coordinator starts again.
    public static func takesInProgress(dataDirectory: String) async throws -> [TakeRecord] {
        let (store, _) = try open(dataDirectory)
        return try await store.takes().filter { $0.state == .recording }.reversed()
    }

    /// What `capfleet dev` says at Ctrl-C about takes that were recording: nil when none was.
    public static func inProgressNote(_ takes: [TakeRecord], restart: String) -> String? {
        guard !takes.isEmpty else { return nil }
        let lines = takes.map { take in
            "  \(take.id)\(take.name == take.id ? "" : " (\(take.name))"), started by \(take.createdBy), written by the \(take.store == .agent ? "agents" : "coordinator")"
        }
        return """
            Still in progress (\(takes.count == 1 ? "a take was" : "\(takes.count) takes were") recording at Ctrl-C, and \(takes.count == 1 ? "is" : "are") not stopped):
            \(lines.joined(separator: "\n"))
            \(takes.count == 1 ? "It resumes" : "They resume") when the fleet starts again (\(restart)); the frames in between are missing from \(takes.count == 1 ? "it" : "them"), counted as dropped. \
            To end \(takes.count == 1 ? "it" : "one") then: capfleet record stop \(takes[0].id)
            """
    }
}
