import FleetCore
import Testing

@Suite struct ConfigurationLeasesTests {
    let minute: UInt64 = 60_000_000_000

    @Test func lease_isExclusive_andTheRefusalNamesTheHolder() throws {
        var leases = ConfigurationLeases()
        _ = try leases.acquire("cam-1", by: "ana", for: minute, now: 0).get()
        guard case let .failure(refusal) = leases.acquire("cam-1", by: "bo", for: minute, now: 1) else {
            Issue.record("a second operator must not get the lease")
            return
        }
        #expect(refusal.description.contains("ana"))
        #expect(leases.authorize("cam-1", by: "bo", now: 2) == .failure(refusal))
        #expect((try? leases.authorize("cam-1", by: "ana", now: 2).get()) != nil)
    }

    @Test func lease_renewsForItsHolder_andExpires() throws {
        var leases = ConfigurationLeases()
        _ = try leases.acquire("cam-1", by: "ana", for: minute, now: 0).get()
        let renewed = try leases.acquire("cam-1", by: "ana", for: minute, now: minute / 2).get()
        #expect(renewed.expiresAt == minute + minute / 2)
        #expect(leases.expire(now: minute).isEmpty)
        #expect(leases.expire(now: 2 * minute).map(\.holder) == ["ana"])
        #expect((try? leases.acquire("cam-1", by: "bo", for: minute, now: 2 * minute).get()) != nil)
    }

    @Test func expiredLease_authorizesNobody_evenBeforeItIsSwept() {
        var leases = ConfigurationLeases()
        _ = leases.acquire("cam-1", by: "ana", for: minute, now: 0)
        #expect(leases.authorize("cam-1", by: "ana", now: minute) == .failure(.notHeld(deviceID: "cam-1")))
    }

    @Test func release_onlyByTheHolder_andASessionsLeasesWhenItEnds() throws {
        var leases = ConfigurationLeases()
        _ = try leases.acquire("cam-1", by: "ana", for: minute, now: 0, session: "s1").get()
        _ = try leases.acquire("cam-2", by: "ana", for: minute, now: 0, session: "s1").get()
        _ = try leases.acquire("cam-3", by: "bo", for: minute, now: 0).get()
        if case .success = leases.release("cam-1", by: "bo", now: 1) { Issue.record("bo cannot release ana's lease") }
        #expect(leases.releaseAll(inSession: "s1").map(\.deviceID) == ["cam-1", "cam-2"])
        #expect(leases.leases.keys.sorted() == ["cam-3"])
        #expect((try? leases.release("cam-3", by: "bo", now: 2).get())?.holder == "bo")
    }

    @Test func releaseAllHeldBy_takesEveryLeaseOfThatOperator_timedOrInASession() throws {
        var leases = ConfigurationLeases()
        _ = try leases.acquire("cam-1", by: "ana", for: minute, now: 0).get()
        _ = try leases.acquire("cam-2", by: "ana", for: minute, now: 0, session: "s1").get()
        _ = try leases.acquire("cam-3", by: "bo", for: minute, now: 0).get()
        #expect(leases.releaseAll(heldBy: "ana").map(\.deviceID) == ["cam-1", "cam-2"])
        #expect(leases.leases.keys.sorted() == ["cam-3"])
        #expect(leases.releaseAll(heldBy: "ana").isEmpty)
    }

    @Test func operatorSessions_expireWhenSilentForTheirTimeout_andEndOnGoodbye() {
        var sessions = OperatorSessions()
        sessions.heard("s1", timeout: 10, now: 0)
        sessions.heard("s2", timeout: 10, now: 0)
        sessions.heard("s1", timeout: 10, now: 8)
        #expect(sessions.expire(now: 9).isEmpty)
        #expect(sessions.expire(now: 10) == ["s2"])
        #expect(sessions.isActive("s1"))
        sessions.end("s1")
        #expect(!sessions.isActive("s1"))
        #expect(sessions.expire(now: 100).isEmpty)
    }
}
