import FleetCore
import FleetStore
import Foundation
import Testing

/// The dashboard's sign-in links and sessions as the fleet database keeps them.
@Suite struct DashboardSessionStoreTests {
    static let hashA = String(repeating: "a", count: 64)
    static let hashB = String(repeating: "b", count: 64)
    static let hashC = String(repeating: "c", count: 64)

    func store() async throws -> FleetDatabase {
        let store = try FleetDatabase.inMemory()
        for (index, (name, role)) in [("ana", OperatorRole.admin), ("vic", .viewer)].enumerated() {
            try await store.saveOperator(
                OperatorRecord(
                    name: name, publicKey: String(repeating: "\(index)", count: 40), role: role.rawValue,
                    addedAt: 1, addedBy: "test"),
                audit: AuditEntry(at: 1, actor: "test", action: "operator.add", target: name, outcome: "ok"))
        }
        return store
    }

    func link(_ hash: String, for name: String, at now: Int64 = 100) -> DashboardSignInRecord {
        DashboardSignInRecord(
            tokenHash: hash, operatorName: name, createdAt: now, expiresAt: now + DashboardAccess.signInLinkLifetime, createdBy: name)
    }

    func session(_ id: String, secretHash: String, at now: Int64 = 200) -> DashboardSessionRecord {
        DashboardSessionRecord(
            id: id, secretHash: secretHash, operatorName: "whoever the link says", csrfToken: "csrf-\(id)", createdAt: now,
            expiresAt: now + DashboardAccess.sessionLifetime, peer: "127.0.0.1", userAgent: "test")
    }

    func redeem(
        _ store: FleetDatabase, _ hash: String, as id: String, secret: String, now: Int64 = 200
    ) async throws
        -> Result<DashboardSessionRecord, DashboardAccess.LinkRefusal>
    {
        try await store.redeemDashboardSignIn(tokenHash: hash, session: session(id, secretHash: secret, at: now), now: now) { opened in
            AuditEntry(at: now, actor: opened.operatorName + " via dashboard", action: "dashboard.sign_in", target: opened.id, outcome: "ok")
        }
    }

    @Test func aLink_signsItsOperatorInOnce_andTheSessionIsFoundByItsSecretsHash() async throws {
        let store = try await store()
        try await store.addDashboardSignIn(
            link(Self.hashA, for: "vic"),
            audit: AuditEntry(at: 100, actor: "vic", action: "dashboard.link", target: "vic", outcome: "ok"))
        let opened = try #require(try await redeem(store, Self.hashA, as: "s1", secret: Self.hashB).get())
        #expect(opened.operatorName == "vic", "the link's operator, not what the session was made with")
        let again = try await redeem(store, Self.hashA, as: "s2", secret: Self.hashC)
        #expect(again == .failure(.used(atUnixMs: 200)))

        let (found, account) = try #require(try await store.dashboardSession(secretHash: Self.hashB))
        #expect(found.id == "s1" && account?.role == OperatorRole.viewer.rawValue)
        #expect(try await store.dashboardSession(secretHash: Self.hashC) == nil, "the refused redemption opened nothing")
        #expect(try await store.auditLog(actionPrefix: "dashboard.").map(\.action) == ["dashboard.link", "dashboard.sign_in"])
    }

    @Test func anExpiredOrUnknownLink_opensNothing() async throws {
        let store = try await store()
        try await store.addDashboardSignIn(
            link(Self.hashA, for: "ana"), audit: AuditEntry(at: 100, actor: "ana", action: "dashboard.link", target: "ana", outcome: "ok"))
        let late = 100 + DashboardAccess.signInLinkLifetime
        #expect(try await redeem(store, Self.hashA, as: "s1", secret: Self.hashB, now: late) == .failure(.expired(atUnixMs: late)))
        #expect(try await redeem(store, Self.hashC, as: "s2", secret: Self.hashB) == .failure(.unknown))
        #expect(try await store.dashboardSessions(includingEnded: true, now: late).isEmpty)
    }

    @Test func aLinkForNobody_isRefused() async throws {
        let store = try await store()
        await #expect(throws: StoreError.self) {
            try await store.addDashboardSignIn(
                link(Self.hashA, for: "nobody"),
                audit: AuditEntry(at: 100, actor: "ana", action: "dashboard.link", target: "nobody", outcome: "ok"))
        }
    }

    @Test func endedSessions_leaveTheLiveList_andRemovingTheOperatorRemovesTheirs() async throws {
        let store = try await store()
        try await store.addDashboardSignIn(
            link(Self.hashA, for: "vic"), audit: AuditEntry(at: 100, actor: "vic", action: "dashboard.link", target: "vic", outcome: "ok"))
        try await store.addDashboardSignIn(
            link(Self.hashC, for: "vic"), audit: AuditEntry(at: 100, actor: "vic", action: "dashboard.link", target: "vic", outcome: "ok"))
        _ = try await redeem(store, Self.hashA, as: "s1", secret: String(repeating: "1", count: 64))
        _ = try await redeem(store, Self.hashC, as: "s2", secret: String(repeating: "2", count: 64))
        #expect(
            try await store.endDashboardSession(
                "s1", by: "ana", at: 300,
                audit: AuditEntry(at: 300, actor: "ana", action: "dashboard.revoke", target: "s1", outcome: "ok")))
        #expect(
            try await !store.endDashboardSession(
                "s1", by: "ana", at: 301,
                audit: AuditEntry(at: 301, actor: "ana", action: "dashboard.revoke", target: "s1", outcome: "ok")),
            "already ended")
        #expect(try await store.dashboardSessions(includingEnded: false, now: 400).map(\.id) == ["s2"])
        #expect(try await store.dashboardSessions(includingEnded: true, now: 400).count == 2)
        #expect(
            try await store.removeOperator("vic", audit: AuditEntry(at: 500, actor: "ana", action: "operator.remove", target: "vic", outcome: "ok")))
        #expect(try await store.dashboardSessions(includingEnded: true, now: 600).isEmpty)
        #expect(try await store.dashboardSession(secretHash: String(repeating: "2", count: 64)) == nil)
    }
}
