import FleetCore
import Foundation
import GRDB
import Testing

@testable import FleetStore

/// Enrollment tokens that admit one agent or many, against a real database file per test:
/// uses, names, expiry, revocation, the repeat of an accepted enrollment, the audit log.
@Suite final class EnrollmentTokenTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-tokens-\(UUID().uuidString.prefix(8))").path

    init() throws { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    var path: String { directory + "/fleet.sqlite" }

    /// A 40-character key (the store checks the length; the bytes do not matter here).
    static func key(_ seed: String) -> String { seed.padding(toLength: 40, withPad: "x", startingAt: 0) }

    static let created: Int64 = 1_000_000

    @discardableResult
    func makeToken(
        _ store: FleetDatabase, _ seed: String, name: String = "", prefix: String = "", uses: Int = 1,
        validFor milliseconds: Int64 = 600_000
    ) async throws -> String {
        let spec = try EnrollmentTokenSpec(name: name, namePrefix: prefix, uses: uses)
        let record = EnrollmentTokenRecord(
            publicKey: Self.key(seed), spec: spec, createdBy: "ana", createdAt: Self.created,
            expiresAt: Self.created + milliseconds)
        try await store.createEnrollmentToken(
            record, audit: AuditEntry(at: Self.created, actor: "ana", action: "enroll.token", target: record.name, outcome: "ok"))
        return record.publicKey
    }

    /// Enrolls `node` with key `key` as the coordinator does, auditing each attempt the same way.
    func enroll(
        _ store: FleetDatabase, token: String, node: String, key: String, asking name: String = "",
        at now: Int64 = created + 1000
    ) async throws -> EnrollmentOutcome {
        try await store.enroll(tokenKey: token, nodeKey: Self.key(key), nodeID: node, requestedName: name, at: now) { outcome, facts in
            let left = facts.map { "\($0.remaining) of \($0.uses) left" } ?? "no such token"
            let (result, detail): (String, String) =
                switch outcome {
                case let .enrolled(name, use, _): ("ok", "as \(name), use \(use), token \(token.prefix(8)), \(left)")
                case let .enrolledAgain(name): ("ok", "again as \(name), token \(token.prefix(8)), \(left)")
                case let .refused(refusal): ("refused", "\(refusal), token \(token.prefix(8)), \(left)")
                }
            return AuditEntry(at: now, actor: "agent:\(node)", action: "node.enroll", target: node, outcome: result, detail: detail)
        }
    }

    func summary(_ store: FleetDatabase, _ token: String) async throws -> EnrollmentTokenSummary {
        try #require(try await store.enrollmentTokens(includeClosed: true, at: Self.created).first { $0.token.publicKey == token })
    }

    @Test func aTokenForTwo_admitsTwoAgentsInOrder_thenRefusesTheThird_andAuditsEachAttempt() async throws {
        let store = try FleetDatabase(path: path)
        let token = try await makeToken(store, "fleet", prefix: "cam-", uses: 2)

        #expect(try await enroll(store, token: token, node: "n1", key: "k1") == .enrolled(name: "cam-1", use: 1, uses: 2))
        #expect(try await enroll(store, token: token, node: "n2", key: "k2") == .enrolled(name: "cam-2", use: 2, uses: 2))
        let third = try await enroll(store, token: token, node: "n3", key: "k3", at: Self.created + 2000)
        #expect(third == .refused(.alreadyUsed(uses: 2, lastAt: Self.created + 1000, lastNodeID: "n2")))

        #expect(try await store.liveNodeKey("n1")?.name == "cam-1")
        #expect(try await store.liveNodeKey("n2")?.name == "cam-2")
        #expect(try await store.liveNodeKey("n3") == nil, "the refused agent has no key")
        let listed = try await summary(store, token)
        #expect(listed.uses.map(\.name) == ["cam-1", "cam-2"] && listed.uses.map(\.nodeId) == ["n1", "n2"])
        #expect(listed.facts.remaining == 0 && listed.facts.state(at: Self.created) == .spent)

        let audit = try await store.auditLog(actionPrefix: "node.enroll").map { "\($0.actor) \($0.outcome) \($0.detail)" }
        #expect(audit.count == 3, "\(audit)")
        #expect(audit[0] == "agent:n1 ok as cam-1, use 1, token fleetxxx, 1 of 2 left")
        #expect(audit[1] == "agent:n2 ok as cam-2, use 2, token fleetxxx, 0 of 2 left")
        #expect(audit[2].hasPrefix("agent:n3 refused alreadyUsed"), "\(audit[2])")
    }

    @Test func prefixNames_skipNamesOtherNodesHave_andAreNeverHandedOutTwice() async throws {
        let store = try FleetDatabase(path: path)
        // cam-1 is a registered node's name, cam-3 an enrolled node's that has not registered yet.
        _ = try await store.registerNode(
            NodeRegistration(nodeID: "old", name: "cam-1", hostname: "h", softwareVersion: "0", address: "", devices: []), at: 1)
        let single = try await makeToken(store, "single", name: "cam-3")
        #expect(try await enroll(store, token: single, node: "n3", key: "k3") == .enrolled(name: "cam-3", use: 1, uses: 1))

        let token = try await makeToken(store, "fleet", prefix: "cam-", uses: 5)
        #expect(try await enroll(store, token: token, node: "a", key: "ka").name == "cam-2")
        #expect(try await enroll(store, token: token, node: "b", key: "kb").name == "cam-4")
        // Another prefix token starts at 1 too, and skips every name taken by now.
        let other = try await makeToken(store, "other", prefix: "cam-", uses: 5)
        #expect(try await enroll(store, token: other, node: "c", key: "kc").name == "cam-5")
        // A name this token gave stays given, even once its node is forgotten and the name is free.
        _ = try await store.setNodeOnline("old", online: false, at: 2)
        try await store.forgetNode("old")
        #expect(try await enroll(store, token: token, node: "d", key: "kd").name == "cam-6")
        #expect(try await summary(store, token).token.nextNumber == 7)
    }

    @Test func theAgentsOwnName_namesTheNode_butNotAnotherNodesName_norABadOne() async throws {
        let store = try FleetDatabase(path: path)
        let token = try await makeToken(store, "fleet", prefix: "cam-", uses: 3)
        #expect(try await enroll(store, token: token, node: "n1", key: "k1", asking: "stage-left") == .enrolled(name: "stage-left", use: 1, uses: 3))
        #expect(
            try await enroll(store, token: token, node: "n2", key: "k2", asking: "stage-left")
                == .refused(.nameTaken(name: "stage-left", nodeID: "n1")))
        #expect(
            try await enroll(store, token: token, node: "n2", key: "k2", asking: "no spaces please")
                == .refused(.invalidName("no spaces please")))
        // Refusals spend nothing: the numbering fallback still starts at 1, with uses left for it.
        #expect(try await enroll(store, token: token, node: "n2", key: "k2") == .enrolled(name: "cam-1", use: 2, uses: 3))
        #expect(try await summary(store, token).facts.remaining == 1)
        // A token for one name gives the admin's name, whatever the agent asks.
        let single = try await makeToken(store, "single", name: "booth")
        #expect(try await enroll(store, token: single, node: "n9", key: "k9", asking: "stage-left") == .enrolled(name: "booth", use: 1, uses: 1))
    }

    @Test func theSameNodeAndKeyAgain_isAnsweredAsBefore_withoutSpendingAUse() async throws {
        let store = try FleetDatabase(path: path)
        let token = try await makeToken(store, "fleet", prefix: "cam-", uses: 2)
        #expect(try await enroll(store, token: token, node: "n1", key: "k1") == .enrolled(name: "cam-1", use: 1, uses: 2))
        // The agent died before it stored its key file, and presents the same key again.
        #expect(try await enroll(store, token: token, node: "n1", key: "k1") == .enrolledAgain(name: "cam-1"))
        #expect(try await summary(store, token).uses.count == 1)
        #expect(try await enroll(store, token: token, node: "n2", key: "k2") == .enrolled(name: "cam-2", use: 2, uses: 2))
        // Even with every use spent, the repeat is the same answer; another key for that node is not.
        #expect(try await enroll(store, token: token, node: "n1", key: "k1") == .enrolledAgain(name: "cam-1"))
        #expect(
            try await enroll(store, token: token, node: "n1", key: "k1b")
                == .refused(.usedByThisNodeBefore(at: Self.created + 1000, name: "cam-1", keyRevoked: false)))
        // A one-time token too: the known weakness of a lost answer is gone.
        let single = try await makeToken(store, "single", name: "booth")
        #expect(try await enroll(store, token: single, node: "n5", key: "k5") == .enrolled(name: "booth", use: 1, uses: 1))
        #expect(try await enroll(store, token: single, node: "n5", key: "k5") == .enrolledAgain(name: "booth"))
        let audit = try await store.auditLog(actionPrefix: "node.enroll").map(\.detail)
        #expect(audit.filter { $0.hasPrefix("again as") }.count == 3, "every repeat is audited: \(audit)")
    }

    @Test func anExpiredToken_admitsNobody_andItsNodesStay() async throws {
        let store = try FleetDatabase(path: path)
        let token = try await makeToken(store, "fleet", prefix: "cam-", uses: 5, validFor: 60_000)
        #expect(try await enroll(store, token: token, node: "n1", key: "k1", at: Self.created + 59_999).name == "cam-1")
        #expect(
            try await enroll(store, token: token, node: "n2", key: "k2", at: Self.created + 60_000) == .refused(.expired(at: Self.created + 60_000)))
        #expect(try await store.liveNodeKey("n1") != nil)
        #expect(try await store.enrollmentTokens(includeClosed: false, at: Self.created + 60_000).isEmpty, "an expired token is not listed as open")
        #expect(try await store.enrollmentTokens(includeClosed: false, at: Self.created).count == 1)
    }

    @Test func aRevokedToken_admitsNobody_itsNodesStay_andTheRevocationIsAudited() async throws {
        let store = try FleetDatabase(path: path)
        let token = try await makeToken(store, "fleet", prefix: "cam-", uses: 5)
        #expect(try await enroll(store, token: token, node: "n1", key: "k1").name == "cam-1")

        let revoked = try await store.revokeEnrollmentToken(
            matching: String(token.prefix(8)), by: "ana", reason: "image leaked", at: Self.created + 2000
        ) {
            AuditEntry(
                at: Self.created + 2000, actor: "ana", action: "enroll.token.revoke", target: $0.token.name, outcome: "ok",
                detail: "\($0.facts.used) used, \($0.facts.remaining) left: image leaked")
        }
        #expect(revoked.token.revokedBy == "ana" && revoked.facts.state(at: Self.created) == .revoked)
        #expect(
            try await enroll(store, token: token, node: "n2", key: "k2", at: Self.created + 3000)
                == .refused(.revoked(at: Self.created + 2000, by: "ana")))
        #expect(try await store.liveNodeKey("n1")?.name == "cam-1", "the node it admitted stays enrolled")
        // The enrolled node's repeat still gets its answer: it holds that key already.
        #expect(try await enroll(store, token: token, node: "n1", key: "k1") == .enrolledAgain(name: "cam-1"))
        #expect(try await store.auditLog(actionPrefix: "enroll.token.revoke").map(\.detail) == ["1 used, 4 left: image leaked"])

        await #expect(throws: StoreError.self) {
            _ = try await store.revokeEnrollmentToken(matching: token, by: "ana", reason: "", at: 1) { _ in
                AuditEntry(at: 1, actor: "ana", action: "x", target: "", outcome: "ok")
            }
        }
        do {
            _ = try await store.revokeEnrollmentToken(matching: "nosuchto", by: "ana", reason: "", at: 1) { _ in
                AuditEntry(at: 1, actor: "ana", action: "x", target: "", outcome: "ok")
            }
            Issue.record("an unknown token was revoked")
        } catch {
            #expect(error.description.contains("not found"), "\(error)")
        }
        #expect(try await store.auditLog(actionPrefix: "enroll.token.revoke").count == 1, "refused revocations change nothing")
    }

    @Test func aRevokedNode_cannotLetItselfBackInWithTheSameToken() async throws {
        let store = try FleetDatabase(path: path)
        let token = try await makeToken(store, "fleet", prefix: "cam-", uses: 5)
        #expect(try await enroll(store, token: token, node: "n1", key: "k1").name == "cam-1")
        _ = try await store.revokeNode(
            "n1", by: "ana", reason: "stolen", at: Self.created + 2000,
            audit: AuditEntry(at: Self.created + 2000, actor: "ana", action: "node.revoke", target: "n1", outcome: "ok"))
        // The same Secret is still on the stolen host: a fresh key for the same node id is refused…
        #expect(
            try await enroll(store, token: token, node: "n1", key: "k1-fresh")
                == .refused(.usedByThisNodeBefore(at: Self.created + 1000, name: "cam-1", keyRevoked: true)))
        // …and so is the revoked key itself.
        #expect(
            try await enroll(store, token: token, node: "n1", key: "k1")
                == .refused(.usedByThisNodeBefore(at: Self.created + 1000, name: "cam-1", keyRevoked: true)))
        #expect(try await summary(store, token).uses.count == 1)
    }

    @Test func theSchema_refusesMoreUsesThanATokenAdmits_andKeepsUsesAppendOnly() async throws {
        let store = try FleetDatabase(path: path)
        let token = try await makeToken(store, "fleet", prefix: "cam-", uses: 1)
        #expect(try await enroll(store, token: token, node: "n1", key: "k1").name == "cam-1")
        // Around the store, as a careless script would.
        let queue = try DatabaseQueue(path: path)
        #expect(throws: DatabaseError.self) {
            try queue.write {
                try $0.execute(sql: "INSERT INTO enrollmentTokenUse VALUES (?, 2, 'n2', ?, 'cam-2', 1)", arguments: [token, Self.key("k2")])
            }
        }
        #expect(throws: DatabaseError.self) { try queue.write { try $0.execute(sql: "DELETE FROM enrollmentTokenUse") } }
        #expect(throws: DatabaseError.self) { try queue.write { try $0.execute(sql: "UPDATE enrollmentTokenUse SET name = 'x'") } }
        #expect(try await summary(store, token).uses.map(\.name) == ["cam-1"])
    }

    /// A database from before v14 keeps its tokens: a spent one-time token has its one use.
    @Test func upgradeToTokenUses_givesEachSpentTokenItsUse() async throws {
        let queue = try DatabaseQueue(path: path)
        try FleetSchema.migrator.migrate(queue, upTo: "v13: rejection counts")
        try await queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO enrollmentToken (publicKey, name, createdBy, createdAt, expiresAt, usedAt, usedByNode)
                        VALUES (?, 'booth', 'ana', 1, 100000, 500, 'n1'), (?, 'spare', 'ana', 1, 100000, NULL, NULL)
                    """, arguments: [Self.key("used"), Self.key("spare")])
            try db.execute(
                sql: "INSERT INTO nodeKey (publicKey, nodeId, name, enrolledAt, tokenKey) VALUES (?, 'n1', 'booth', 500, ?)",
                arguments: [Self.key("k1"), Self.key("used")])
        }
        let store = try FleetDatabase(path: path)
        let used = try await summary(store, Self.key("used"))
        #expect(used.uses.map(\.nodeId) == ["n1"] && used.uses.first?.usedAt == 500 && used.token.uses == 1)
        #expect(used.facts.state(at: 1000) == .spent)
        #expect(
            try await enroll(store, token: Self.key("used"), node: "n2", key: "k2", at: 1000)
                == .refused(.alreadyUsed(uses: 1, lastAt: 500, lastNodeID: "n1")))
        #expect(try await enroll(store, token: Self.key("spare"), node: "n2", key: "k2", at: 1000) == .enrolled(name: "spare", use: 1, uses: 1))
    }
}
