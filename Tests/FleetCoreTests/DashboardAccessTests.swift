import FleetCore
import Testing

/// The dashboard's sign-in rules, with time passed in.
@Suite struct DashboardAccessTests {
    static let session = DashboardAccess.Session(
        operatorName: "ana", role: .operator, csrfToken: "token-1",
        expiresAtUnixMs: 10_000, endedAtUnixMs: nil)
    static let read = DashboardAccess.Request(changesState: false, csrfToken: nil, originIsOwn: true)
    static let post = DashboardAccess.Request(changesState: true, csrfToken: "token-1", originIsOwn: true)

    @Test func aLink_worksOnce_andOnlyBeforeItExpires() {
        #expect(DashboardAccess.refusal(redeeming: .init(expiresAtUnixMs: 100, usedAtUnixMs: nil), now: 99) == nil)
        #expect(DashboardAccess.refusal(redeeming: .init(expiresAtUnixMs: 100, usedAtUnixMs: nil), now: 100) == .expired(atUnixMs: 100))
        #expect(DashboardAccess.refusal(redeeming: .init(expiresAtUnixMs: 100, usedAtUnixMs: 50), now: 60) == .used(atUnixMs: 50))
        #expect(DashboardAccess.refusal(redeeming: nil, now: 0) == .unknown)
        #expect(DashboardAccess.LinkRefusal.used(atUnixMs: 1).description.contains("capfleet dashboard login"))
    }

    @Test func aLiveSession_readsAndChanges_withItsToken() {
        #expect(DashboardAccess.verdict(on: Self.read, session: Self.session, now: 5_000) == .allowed(operatorName: "ana", role: .operator))
        #expect(DashboardAccess.verdict(on: Self.post, session: Self.session, now: 5_000) == .allowed(operatorName: "ana", role: .operator))
    }

    @Test func noEndedExpiredOrOrphanedSession_isServed() {
        guard case .signInNeeded = DashboardAccess.verdict(on: Self.read, session: nil, now: 0) else { Issue.record("no session"); return }
        var ended = Self.session
        ended.endedAtUnixMs = 4_000
        #expect(
            DashboardAccess.verdict(on: Self.read, session: ended, now: 5_000)
                == .signInNeeded("this session was ended (signed out or revoked); sign in again"))
        #expect(
            DashboardAccess.verdict(on: Self.read, session: Self.session, now: 10_000)
                == .signInNeeded("this session expired (sessions last 12 hours); sign in again"))
        var removed = Self.session
        removed.role = nil
        #expect(DashboardAccess.verdict(on: Self.read, session: removed, now: 5_000) == .signInNeeded("operator ana was removed"))
    }

    @Test func aChangeWithoutTheToken_orFromAnotherSite_isAForgery() {
        var missing = Self.post
        missing.csrfToken = nil
        var wrong = Self.post
        wrong.csrfToken = "token-2"
        var foreign = Self.post
        foreign.originIsOwn = false
        for request in [missing, wrong, foreign] {
            guard case .forgery = DashboardAccess.verdict(on: request, session: Self.session, now: 5_000) else {
                Issue.record("not refused: \(request)")
                continue
            }
        }
        // A read needs no token: the page's own images and listings.
        #expect(
            DashboardAccess.verdict(on: .init(changesState: false, csrfToken: nil, originIsOwn: false), session: Self.session, now: 5_000)
                == .allowed(operatorName: "ana", role: .operator))
    }

    @Test func secretsCompare_byContent() {
        #expect(DashboardAccess.constantTimeEqual("abc", "abc"))
        #expect(!DashboardAccess.constantTimeEqual("abc", "abd"))
        #expect(!DashboardAccess.constantTimeEqual("abc", "abcd"))
    }
}
