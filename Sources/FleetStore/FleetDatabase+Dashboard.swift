import FleetCore
import GRDB

/// A one-time sign-in link for the web dashboard, by the SHA-256 of its token.
public struct DashboardSignInRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "dashboardSignIn"
    public var tokenHash: String
    public var operatorName: String
    public var createdAt: UnixMilliseconds
    public var expiresAt: UnixMilliseconds
    public var createdBy: String
    public var usedAt: UnixMilliseconds?

    public init(tokenHash: String, operatorName: String, createdAt: UnixMilliseconds, expiresAt: UnixMilliseconds, createdBy: String) {
        self.tokenHash = tokenHash
        self.operatorName = operatorName
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.createdBy = createdBy
    }
}

/// A browser signed in to the dashboard: `id` is shown and revoked by, the cookie's secret
/// is kept only as `secretHash`.
public struct DashboardSessionRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "dashboardSession"
    public var id: String
    public var secretHash: String
    public var operatorName: String
    public var csrfToken: String
    public var createdAt: UnixMilliseconds
    public var expiresAt: UnixMilliseconds
    public var lastSeenAt: UnixMilliseconds
    public var endedAt: UnixMilliseconds?
    public var endedBy: String?
    public var peer: String
    public var userAgent: String

    public init(
        id: String, secretHash: String, operatorName: String, csrfToken: String, createdAt: UnixMilliseconds,
        expiresAt: UnixMilliseconds, peer: String, userAgent: String
    ) {
        self.id = id
        self.secretHash = secretHash
        self.operatorName = operatorName
        self.csrfToken = csrfToken
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        lastSeenAt = createdAt
        self.peer = peer
        self.userAgent = userAgent
    }
}

extension FleetDatabase {
    /// Stores a new sign-in link for an existing operator, with its audit entry.
    public func addDashboardSignIn(_ link: DashboardSignInRecord, audit: AuditEntry) async throws(StoreError) {
        try await write("storing a dashboard sign-in link for \(link.operatorName)") { db in
            guard try OperatorRecord.fetchOne(db, key: link.operatorName) != nil else {
                throw StoreError.refused(reason: "there is no operator \(link.operatorName)")
            }
            try link.insert(db)
            _ = try audit.inserted(db)
        }
    }

    /// Uses up the link with this token hash and opens `session` for its operator, in one
    /// transaction (a link signs in once, even when two browsers open it at the same time).
    /// The session's operator is the link's, whatever `session` says.
    public func redeemDashboardSignIn(
        tokenHash: String, session: DashboardSessionRecord, now: UnixMilliseconds,
        audit: @escaping @Sendable (DashboardSessionRecord) -> AuditEntry
    ) async throws(StoreError)
        -> Result<DashboardSessionRecord, DashboardAccess.LinkRefusal>
    {
        try await write("signing in to the dashboard") { db in
            let link = try DashboardSignInRecord.fetchOne(db, key: tokenHash)
            let rule = link.map { DashboardAccess.Link(expiresAtUnixMs: $0.expiresAt, usedAtUnixMs: $0.usedAt) }
            if let refusal = DashboardAccess.refusal(redeeming: rule, now: now) { return .failure(refusal) }
            guard var link else { return .failure(.unknown) }
            link.usedAt = now
            try link.update(db)
            var opened = session
            opened.operatorName = link.operatorName
            try opened.insert(db)
            _ = try audit(opened).inserted(db)
            return .success(opened)
        }
    }

    /// The session whose cookie secret hashes to `secretHash`, with its operator's role now
    /// (nil role: the operator was removed since).
    public func dashboardSession(secretHash: String) async throws(StoreError) -> (DashboardSessionRecord, OperatorRecord?)? {
        try await read("looking up a dashboard session") { db in
            guard let session = try DashboardSessionRecord.filter(Column("secretHash") == secretHash).fetchOne(db) else { return nil }
            return (session, try OperatorRecord.fetchOne(db, key: session.operatorName))
        }
    }

    /// Notes that the session was used now (what `dashboard sessions` shows as last seen).
    public func touchDashboardSession(_ id: String, at now: UnixMilliseconds) async throws(StoreError) {
        try await write("noting dashboard session \(id) in use") { db in
            try db.execute(sql: "UPDATE dashboardSession SET lastSeenAt = ? WHERE id = ? AND lastSeenAt < ?", arguments: [now, id, now])
        }
    }

    /// Ends a session (signed out or revoked); false if there is no live session by that id.
    public func endDashboardSession(_ id: String, by actor: String, at now: UnixMilliseconds, audit: AuditEntry) async throws(StoreError) -> Bool {
        try await write("ending dashboard session \(id)") { db in
            try db.execute(
                sql: "UPDATE dashboardSession SET endedAt = ?, endedBy = ? WHERE id = ? AND endedAt IS NULL",
                arguments: [now, actor, id])
            guard db.changesCount > 0 else { return false }
            _ = try audit.inserted(db)
            return true
        }
    }

    /// Sessions, newest first: the live ones only unless `includingEnded`.
    public func dashboardSessions(includingEnded: Bool, now: UnixMilliseconds) async throws(StoreError) -> [DashboardSessionRecord] {
        try await read("listing dashboard sessions") { db in
            var request = DashboardSessionRecord.order(Column("createdAt").desc)
            if !includingEnded { request = request.filter(Column("endedAt") == nil && Column("expiresAt") > now) }
            return try request.fetchAll(db)
        }
    }
}
