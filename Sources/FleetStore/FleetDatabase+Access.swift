import FleetCore
import Foundation
import GRDB

/// A key a node was enrolled with (Z85 public key).
public struct NodeKeyRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "nodeKey"
    public var publicKey: String
    public var nodeId: String
    public var name: String
    public var enrolledAt: UnixMilliseconds
    public var tokenKey: String
    public var revokedAt: UnixMilliseconds?
    public var revokedBy: String?
    public var revokedReason: String?
}

/// An operator and the role their key holds (viewer, operator or admin).
public struct OperatorRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "operator"
    public var name: String
    public var publicKey: String
    public var role: String
    public var addedAt: UnixMilliseconds
    public var addedBy: String

    public init(name: String, publicKey: String, role: String, addedAt: UnixMilliseconds, addedBy: String) {
        self.name = name
        self.publicKey = publicKey
        self.role = role
        self.addedAt = addedAt
        self.addedBy = addedBy
    }
}

/// Whom a public key belongs to, as the ZAP handler asks.
public enum KeyHolder: Sendable, Equatable {
    case node(NodeKeyRecord)
    case enrollmentToken(EnrollmentTokenRecord)
    case `operator`(OperatorRecord)
}

extension FleetDatabase {
    /// Who holds `publicKey`. Blocking: for the ZAP handler's own thread only.
    public func keyHolderNow(publicKey: String) throws(StoreError) -> KeyHolder? {
        do {
            return try writer.read { db -> KeyHolder? in
                if let node = try NodeKeyRecord.fetchOne(db, key: publicKey) { return .node(node) }
                if let record = try OperatorRecord.filter(Column("publicKey") == publicKey).fetchOne(db) { return .operator(record) }
                if let token = try EnrollmentTokenRecord.fetchOne(db, key: publicKey) { return .enrollmentToken(token) }
                return nil
            }
        } catch {
            throw StoreError.queryFailed(operation: "looking up a key", path: path, underlying: error)
        }
    }

    /// Revokes every live key of the node. Returns the keys revoked (empty: nothing to revoke).
    public func revokeNode(
        _ nodeID: String, by actor: String, reason: String, at now: UnixMilliseconds,
        audit: AuditEntry
    ) async throws(StoreError) -> [NodeKeyRecord] {
        try await write("revoking node \(nodeID)") { db in
            let live = try NodeKeyRecord.filter(Column("nodeId") == nodeID && Column("revokedAt") == nil).fetchAll(db)
            guard !live.isEmpty else { return [] }
            try db.execute(
                sql: "UPDATE nodeKey SET revokedAt = ?, revokedBy = ?, revokedReason = ? WHERE nodeId = ? AND revokedAt IS NULL",
                arguments: [now, actor, reason, nodeID])
            _ = try audit.inserted(db)
            return live
        }
    }

    /// Every revoked key, for the coordinator's in-memory check of each message.
    public func revokedNodeKeys() async throws(StoreError) -> [NodeKeyRecord] {
        try await read("reading revoked keys") { db in try NodeKeyRecord.filter(Column("revokedAt") != nil).fetchAll(db) }
    }

    /// The node's live key, if it has one.
    public func liveNodeKey(_ nodeID: String) async throws(StoreError) -> NodeKeyRecord? {
        try await read("reading the key of \(nodeID)") { db in
            try NodeKeyRecord.filter(Column("nodeId") == nodeID && Column("revokedAt") == nil).fetchOne(db)
        }
    }

    /// Nodes that were enrolled and have no live key now.
    public func revokedNodeIDs() async throws(StoreError) -> Set<String> {
        try await read("reading revoked nodes") { db in
            Set(
                try String.fetchAll(
                    db,
                    sql: """
                        SELECT DISTINCT nodeId FROM nodeKey k WHERE NOT EXISTS
                            (SELECT 1 FROM nodeKey l WHERE l.nodeId = k.nodeId AND l.revokedAt IS NULL)
                        """))
        }
    }

    // MARK: Operators

    /// Adds an operator, or changes the role or key of one with that name, with its audit
    /// entry. Refused (`.refused`) when `OperatorRoster` says so, in the same transaction.
    public func saveOperator(_ record: OperatorRecord, audit: AuditEntry) async throws(StoreError) {
        try await write("storing operator \(record.name)") { db in
            let roster = try OperatorRecord.fetchAll(db).map { (name: $0.name, role: OperatorRole(rawValue: $0.role)) }
            if let role = OperatorRole(rawValue: record.role), let refusal = OperatorRoster.refusal(giving: role, to: record.name, in: roster) {
                throw StoreError.refused(reason: refusal.description)
            }
            if let holder = try NodeKeyRecord.fetchOne(db, key: record.publicKey) {
                throw StoreError.refused(reason: "that key belongs to node \(holder.nodeId); an operator needs a key of their own")
            }
            if let other = try OperatorRecord.filter(Column("publicKey") == record.publicKey && Column("name") != record.name).fetchOne(db) {
                throw StoreError.refused(reason: "that key already belongs to operator \(other.name)")
            }
            try record.save(db)
            _ = try audit.inserted(db)
        }
    }

    /// Removes an operator; false if there was none by that name. Refused (`.refused`) when
    /// `OperatorRoster` says so, decided in the transaction that removes, so two admins
    /// removing each other at once cannot leave the fleet without one.
    public func removeOperator(_ name: String, audit: AuditEntry) async throws(StoreError) -> Bool {
        try await write("removing operator \(name)") { db in
            let roster = try OperatorRecord.fetchAll(db).map { (name: $0.name, role: OperatorRole(rawValue: $0.role)) }
            if let refusal = OperatorRoster.refusal(removing: name, from: roster) { throw StoreError.refused(reason: refusal.description) }
            guard try OperatorRecord.deleteOne(db, key: name) else { return false }
            _ = try audit.inserted(db)
            return true
        }
    }

    public func operators() async throws(StoreError) -> [OperatorRecord] {
        try await read("listing operators") { db in try OperatorRecord.order(Column("name")).fetchAll(db) }
    }

    public func operatorRecord(publicKey: String) async throws(StoreError) -> OperatorRecord? {
        try await read("looking up an operator") { db in try OperatorRecord.filter(Column("publicKey") == publicKey).fetchOne(db) }
    }

    public func operatorRecord(named name: String) async throws(StoreError) -> OperatorRecord? {
        try await read("looking up operator \(name)") { db in try OperatorRecord.fetchOne(db, key: name) }
    }

    /// Audit entries whose action starts with `prefix`, oldest first.
    public func auditLog(actionPrefix prefix: String) async throws(StoreError) -> [AuditEntry] {
        try await read("reading the audit log") { db in
            try AuditEntry.filter(Column("action").like(prefix + "%")).order(Column("id")).fetchAll(db)
        }
    }
}
