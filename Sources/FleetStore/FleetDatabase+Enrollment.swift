import FleetCore
import Foundation
import GRDB

/// An enrollment token, known by the public half of its key pair. It admits `uses` agents;
/// each use is an `EnrollmentTokenUseRecord`.
public struct EnrollmentTokenRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "enrollmentToken"
    public var publicKey: String
    /// The node's name (`naming` "name") or the names' prefix (`naming` "prefix").
    public var name: String
    public var createdBy: String
    public var createdAt: UnixMilliseconds
    public var expiresAt: UnixMilliseconds
    /// The most recent use.
    public var usedAt: UnixMilliseconds?
    public var usedByNode: String?
    public var uses: Int
    public var naming: String
    public var nextNumber: Int
    public var revokedAt: UnixMilliseconds?
    public var revokedBy: String?
    public var revokedReason: String?

    public init(publicKey: String, spec: EnrollmentTokenSpec, createdBy: String, createdAt: UnixMilliseconds, expiresAt: UnixMilliseconds) {
        self.publicKey = publicKey
        switch spec.naming {
        case let .fixed(name): (self.name, naming) = (name, "name")
        case let .prefix(prefix): (self.name, naming) = (prefix, "prefix")
        }
        uses = spec.uses
        nextNumber = 1
        self.createdBy = createdBy
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }

    /// A one-time token for one node called `name`.
    public init(publicKey: String, name: String, createdBy: String, createdAt: UnixMilliseconds, expiresAt: UnixMilliseconds) {
        self.publicKey = publicKey
        self.name = name
        naming = "name"
        uses = 1
        nextNumber = 1
        self.createdBy = createdBy
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }

    public var namingRule: EnrollmentNaming { naming == "prefix" ? .prefix(name) : .fixed(name) }
}

/// One agent admitted by a token: which node, with which key, under which name, when.
public struct EnrollmentTokenUseRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "enrollmentTokenUse"
    public var tokenKey: String
    /// 1 for the first use, up to the token's `uses`.
    public var number: Int
    public var nodeId: String
    public var nodeKey: String
    public var name: String
    public var usedAt: UnixMilliseconds
}

/// A token with its uses, for listings and revocation.
public struct EnrollmentTokenSummary: Sendable, Hashable {
    public var token: EnrollmentTokenRecord
    /// Oldest first.
    public var uses: [EnrollmentTokenUseRecord]

    public init(token: EnrollmentTokenRecord, uses: [EnrollmentTokenUseRecord]) {
        self.token = token
        self.uses = uses
    }

    public var facts: EnrollmentTokenFacts {
        EnrollmentTokenFacts(
            naming: token.namingRule, uses: token.uses, used: uses.count, lastUseAt: uses.last?.usedAt,
            lastUseNodeID: uses.last?.nodeId ?? "", expiresAt: token.expiresAt, revokedAt: token.revokedAt,
            revokedBy: token.revokedBy ?? "", nextNumber: token.nextNumber)
    }
}

extension FleetDatabase {
    public func createEnrollmentToken(_ token: EnrollmentTokenRecord, audit: AuditEntry) async throws(StoreError) {
        try await write("storing an enrollment token") { db in
            try token.insert(db)
            _ = try audit.inserted(db)
        }
    }

    /// Spends a use of the token on `nodeKey` in one transaction, answers a repeat of an
    /// accepted enrollment as before without spending another, or says why not.
    /// `requestedName` is what the agent asks to be called (empty: nothing).
    public func enroll(
        tokenKey: String, nodeKey: String, nodeID: String, requestedName: String = "", at now: UnixMilliseconds,
        audit: @escaping @Sendable (EnrollmentOutcome, EnrollmentTokenFacts?) -> AuditEntry
    ) async throws(StoreError) -> EnrollmentOutcome {
        try await write("enrolling node \(nodeID)") { db in
            let (outcome, facts) = try Self.spend(db, tokenKey: tokenKey, nodeKey: nodeKey, nodeID: nodeID, requestedName: requestedName, at: now)
            _ = try audit(outcome, facts).inserted(db)
            return outcome
        }
    }

    /// The outcome, and the token as it stands afterwards (nil: no such token).
    private static func spend(
        _ db: Database, tokenKey: String, nodeKey: String, nodeID: String, requestedName: String,
        at now: UnixMilliseconds
    ) throws -> (EnrollmentOutcome, EnrollmentTokenFacts?) {
        guard var summary = try summary(db, tokenKey: tokenKey) else { return (.refused(.unknownToken), nil) }
        let earlier = try summary.uses.first { $0.nodeId == nodeID }.map { use in
            EarlierEnrollment(
                nodeKey: use.nodeKey, name: use.name, at: use.usedAt,
                keyIsLive: try NodeKeyRecord.fetchOne(db, key: use.nodeKey)?.revokedAt == nil)
        }
        let nodeHasLiveKey = try NodeKeyRecord.filter(Column("nodeId") == nodeID && Column("revokedAt") == nil).fetchCount(db) > 0
        let keyIsNodes = try NodeKeyRecord.fetchOne(db, key: nodeKey) != nil
        let keyIsKnown = try keyIsNodes || OperatorRecord.filter(Column("publicKey") == nodeKey).fetchCount(db) > 0
        // Names other nodes have: registered ones, and enrolled ones not yet registered.
        let taken = try Row.fetchAll(
            db,
            sql: """
                SELECT name, id FROM node WHERE id <> ?1
                UNION ALL SELECT name, nodeId FROM nodeKey WHERE revokedAt IS NULL AND nodeId <> ?1
                """, arguments: [nodeID])
        let takenNames = Dictionary(taken.map { (row: Row) in (row["name"] as String, row["id"] as String) }) { first, _ in first }
        let decision = EnrollmentTokenRule.decide(
            token: summary.facts, nodeID: nodeID, nodeKey: nodeKey, requestedName: requestedName,
            earlierUse: earlier, nodeHasLiveKey: nodeHasLiveKey, keyIsKnown: keyIsKnown,
            takenNames: takenNames, now: now)
        switch decision {
        case let .refuse(refusal):
            return (.refused(refusal), summary.facts)
        case let .again(name):
            return (.enrolledAgain(name: name), summary.facts)
        case let .admit(name, use, nextNumber):
            try NodeKeyRecord(publicKey: nodeKey, nodeId: nodeID, name: name, enrolledAt: now, tokenKey: tokenKey).insert(db)
            let record = EnrollmentTokenUseRecord(tokenKey: tokenKey, number: use, nodeId: nodeID, nodeKey: nodeKey, name: name, usedAt: now)
            try record.insert(db)
            summary.token.usedAt = now
            summary.token.usedByNode = nodeID
            summary.token.nextNumber = nextNumber
            try summary.token.update(db)
            summary.uses.append(record)
            // A node that was known before under another name takes the name it enrolled with now.
            try db.execute(sql: "UPDATE node SET name = ? WHERE id = ?", arguments: [name, nodeID])
            return (.enrolled(name: name, use: use, uses: summary.token.uses), summary.facts)
        }
    }

    private static func summary(_ db: Database, tokenKey: String) throws -> EnrollmentTokenSummary? {
        guard let token = try EnrollmentTokenRecord.fetchOne(db, key: tokenKey) else { return nil }
        let uses = try EnrollmentTokenUseRecord.filter(Column("tokenKey") == tokenKey).order(Column("number")).fetchAll(db)
        return EnrollmentTokenSummary(token: token, uses: uses)
    }

    /// Tokens, newest first, with their uses; `includeClosed` false leaves out those that
    /// admit nobody more (spent, expired or revoked).
    public func enrollmentTokens(includeClosed: Bool, at now: UnixMilliseconds) async throws(StoreError) -> [EnrollmentTokenSummary] {
        try await read("listing enrollment tokens") { db in
            let tokens = try EnrollmentTokenRecord.order(Column("createdAt").desc, Column("publicKey")).fetchAll(db)
            let uses = Dictionary(grouping: try EnrollmentTokenUseRecord.order(Column("number")).fetchAll(db), by: \.tokenKey)
            return tokens.map { EnrollmentTokenSummary(token: $0, uses: uses[$0.publicKey] ?? []) }
                .filter { includeClosed || $0.facts.state(at: now) == .open }
        }
    }

    /// Revokes the token whose public key is `key` or starts with it (at least 8 characters,
    /// as listings and audit lines show it): it admits nobody from now on; nodes it admitted
    /// stay. Refused when the prefix fits several tokens or the token was revoked already.
    public func revokeEnrollmentToken(
        matching key: String, by actor: String, reason: String, at now: UnixMilliseconds,
        audit: @escaping @Sendable (EnrollmentTokenSummary) -> AuditEntry
    ) async throws(StoreError) -> EnrollmentTokenSummary {
        try await write("revoking an enrollment token") { db in
            guard key.count >= 8 else {
                throw StoreError.refused(reason: "name the token by its key, or at least its first 8 characters (capfleet enroll list shows them)")
            }
            let matches = try String.fetchAll(
                db, sql: "SELECT publicKey FROM enrollmentToken WHERE substr(publicKey, 1, length(?1)) = ?1 LIMIT 2",
                arguments: [key])
            guard let tokenKey = matches.first else { throw StoreError.notFound(what: "enrollment token \(key)…") }
            guard matches.count == 1 else {
                throw StoreError.refused(reason: "\(key)… fits more than one token; give more of its key")
            }
            guard var summary = try Self.summary(db, tokenKey: tokenKey) else { throw StoreError.notFound(what: "enrollment token \(key)…") }
            if let revokedAt = summary.token.revokedAt {
                let when = Date(timeIntervalSince1970: Double(revokedAt) / 1000).formatted(.iso8601)
                throw StoreError.refused(reason: "token \(tokenKey.prefix(8))… was revoked already, at \(when) by \(summary.token.revokedBy ?? "?")")
            }
            summary.token.revokedAt = now
            summary.token.revokedBy = actor
            summary.token.revokedReason = reason
            try summary.token.update(db)
            _ = try audit(summary).inserted(db)
            return summary
        }
    }
}
