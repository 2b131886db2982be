import FleetCore
import Testing

/// The lease book on a fake wall clock: milliseconds the test chooses.
@Suite struct LeaseBookTests {
    typealias Lease = ConfigurationLeases.Lease
    let minute: UInt64 = 60_000

    @Test func twoOperatorsLockingOneDevice_theFirstDecidedHoldsIt_andTheSecondIsRefusedNamingThem() {
        var book = LeaseBook()
        let ana = book.lock("cam-1", by: "ana", seconds: 60, session: nil, now: 1_000)
        let bo = book.lock("cam-1", by: "bo", seconds: 60, session: nil, now: 1_000)
        #expect(ana.result == .success(Lease(deviceID: "cam-1", holder: "ana", expiresAt: 61_000)))
        guard case let .failure(refusal) = bo.result else {
            Issue.record("bo must not get ana's lease")
            return
        }
        #expect(refusal.description.contains("locked for configuration by ana"))
        // Only the winner's lease is stored; the refusal is audited.
        #expect(ana.actions.count == 1)
        guard case .store(_, at: 1_000, replacing: nil, _) = ana.actions[0] else { Issue.record("ana's lease is stored"); return }
        #expect(bo.actions == [.audit(.init(actor: "bo", action: "lease.lock", target: "cam-1", outcome: "refused", detail: refusal.description))])
    }

    @Test func aLeaseThatRanOut_isRecordedAsExpired_inTheSameStepThatGrantsItToTheNext() {
        var book = LeaseBook()
        _ = book.lock("cam-1", by: "ana", seconds: 60, session: nil, now: 0)
        let bo = book.lock("cam-1", by: "bo", seconds: 60, session: nil, now: minute)
        let old = Lease(deviceID: "cam-1", holder: "ana", expiresAt: minute)
        #expect(bo.result == .success(Lease(deviceID: "cam-1", holder: "bo", expiresAt: 2 * minute)))
        guard bo.actions.count == 3, case .remove(old, _, answered: false) = bo.actions[0], case .announce("cam-1", _) = bo.actions[1],
            case .store(_, _, replacing: nil, _) = bo.actions[2]
        else {
            Issue.record("expected ana's removal, its announcement, then bo's lease: \(bo.actions)")
            return
        }
    }

    @Test func lockDuration_zeroMeansFiveMinutes_andNoneOutlastsADay() {
        var book = LeaseBook()
        let unsaid = book.lock("cam-1", by: "ana", seconds: 0, session: nil, now: 0)
        let tooLong = book.lock("cam-2", by: "ana", seconds: .max, session: nil, now: 0)
        #expect((try? unsaid.result.get())?.expiresAt == 300_000)
        #expect((try? tooLong.result.get())?.expiresAt == 86_400_000)
    }

    @Test func unlock_byTheHolderRemovesTheLease_byAnotherIsRefusedAndAudited() {
        var book = LeaseBook()
        _ = book.lock("cam-1", by: "ana", seconds: 60, session: nil, now: 0)
        let bo = book.unlock("cam-1", by: "bo", now: 1)
        #expect(bo.actions.count == 1)
        if case .success = bo.result { Issue.record("bo cannot give back ana's lease") }
        let ana = book.unlock("cam-1", by: "ana", now: 2)
        guard case let .success(lease) = ana.result, case .remove(lease, _, answered: true) = ana.actions.first else {
            Issue.record("ana's unlock removes her stored lease and waits on it: \(ana.actions)")
            return
        }
        #expect(book.lease(of: "cam-1", now: 3) == nil)
    }

    @Test func aNewLeaseTheStoreRefused_freesTheDeviceAgain() {
        var book = LeaseBook()
        let ana = book.lock("cam-1", by: "ana", seconds: 60, session: nil, now: 0)
        let undone = book.notStored(ana.actions[0])
        #expect(undone)
        #expect(book.lease(of: "cam-1", now: 1) == nil)
        let bo = book.lock("cam-1", by: "bo", seconds: 60, session: nil, now: 2)
        #expect((try? bo.result.get()) != nil)
    }

    @Test func aRenewalTheStoreRefused_leavesTheLeaseAsItWas() throws {
        var book = LeaseBook()
        let first = try book.lock("cam-1", by: "ana", seconds: 60, session: nil, now: 0).result.get()
        let renewal = book.lock("cam-1", by: "ana", seconds: 600, session: nil, now: 1_000)
        let undone = book.notStored(renewal.actions[0])
        #expect(undone)
        #expect(book.lease(of: "cam-1", now: 2_000) == first)
    }

    @Test func aRefusedWrite_undoesNothingDecidedAfterIt() throws {
        var book = LeaseBook()
        let ana = book.lock("cam-1", by: "ana", seconds: 60, session: nil, now: 0)
        _ = book.unlock("cam-1", by: "ana", now: 1)
        let bo = try book.lock("cam-1", by: "bo", seconds: 60, session: nil, now: 2).result.get()
        // ana's store fails only now: bo's lease, decided later, stands.
        let undone = book.notStored(ana.actions[0])
        #expect(undone)
        #expect(book.lease(of: "cam-1", now: 3) == bo)
    }

    @Test func anUnlockTheStoreRefused_keepsTheLease_butAReleaseByTheCoordinatorStands() throws {
        var book = LeaseBook()
        let lease = try book.lock("cam-1", by: "ana", seconds: 60, session: nil, now: 0).result.get()
        let unlock = book.unlock("cam-1", by: "ana", now: 1)
        let undone = book.notStored(unlock.actions[0])
        #expect(undone)
        #expect(book.lease(of: "cam-1", now: 2) == lease)
        let expiry = book.tick(now: minute)
        let kept = book.notStored(expiry[0])
        #expect(!kept)
        #expect(book.lease(of: "cam-1", now: minute) == nil)
    }

    @Test func aRemovedOperator_losesTheirLeases_andALockStillOnItsWayIsRefused() {
        var book = LeaseBook()
        _ = book.lock("cam-1", by: "ana", seconds: 60, session: nil, now: 0)
        _ = book.lock("cam-2", by: "ana", seconds: 60, session: "s1", now: 0)
        let removal = book.holderRemoved("ana", detail: "operator ana was removed by root")
        #expect(removal.filter { if case .remove = $0 { true } else { false } }.count == 2)
        let late = book.lock("cam-3", by: "ana", seconds: 60, session: nil, now: 1)
        #expect(late.result == .failure(.holderRemoved("ana")))
        book.holderAdmitted("ana")
        let readmitted = book.lock("cam-3", by: "ana", seconds: 60, session: nil, now: 2)
        #expect((try? readmitted.result.get()) != nil)
    }

    @Test func aSilentSessionsLeases_goAtTheTickAfterItsTimeout_andAnEndedOnesAtOnce() {
        var book = LeaseBook()
        book.heard(session: "s1", timeoutMilliseconds: 5_000, now: 0)
        book.heard(session: "s2", timeoutMilliseconds: 0, now: 0)
        _ = book.lock("cam-1", by: "ana", seconds: 60, session: "s1", now: 0)
        _ = book.lock("cam-2", by: "bo", seconds: 60, session: "s2", now: 0)
        let early = book.tick(now: 4_999)
        #expect(early.isEmpty)
        let silent = book.tick(now: 5_000)
        #expect(silent.contains(.announce(deviceID: "cam-1", message: "lease of ana released: operator session s1 went silent (disconnected)")))
        #expect(book.lease(of: "cam-2", now: 5_000) != nil)
        let ended = book.endSession("s2")
        #expect(ended.contains(.announce(deviceID: "cam-2", message: "lease of bo released: the operator session ended")))
        #expect(book.lease(of: "cam-2", now: 5_001) == nil)
    }

    @Test func restore_takesUpOnlyLeasesThatHaveNotRunOut() {
        var book = LeaseBook()
        book.restore("cam-1", holder: "ana", expiresAt: 10_000, session: nil, now: 10_000)
        book.restore("cam-2", holder: "bo", expiresAt: 100_000, session: "s1", now: 10_000)
        #expect(book.lease(of: "cam-1", now: 10_000) == nil)
        #expect(
            book.authorize("cam-2", by: "bo", now: 19_999) == .success(Lease(deviceID: "cam-2", holder: "bo", expiresAt: 100_000, sessionID: "s1")))
        // The restored session has one default timeout to be heard from.
        let silent = book.tick(now: 10_000 + UInt64(LeaseBook.defaultSessionTimeoutMilliseconds))
        #expect(silent.contains(.announce(deviceID: "cam-2", message: "lease of bo released: operator session s1 went silent (disconnected)")))
    }

    @Test func aLeaseDoesNotRunOutUnderAChangeOnItsWay_andGoesOnceItIsAnswered() throws {
        var book = LeaseBook()
        _ = book.lock("cam-1", by: "ana", seconds: 60, session: nil, now: 0)
        _ = try book.beginChange("cam-1", by: "ana", now: minute - 1).get()
        // The lease's time is up while ana's command is still on its way: it stays hers.
        let whileChanging = book.tick(now: minute)
        #expect(whileChanging.isEmpty)
        let bo = book.lock("cam-1", by: "bo", seconds: 60, session: nil, now: minute + 1)
        #expect(bo.result == .failure(.heldByAnother(Lease(deviceID: "cam-1", holder: "ana", expiresAt: minute))))
        // But it authorizes no new change of hers, and goes once the command is answered.
        #expect(book.beginChange("cam-1", by: "ana", now: minute + 2) == .failure(.notHeld(deviceID: "cam-1")))
        book.endChange("cam-1")
        let after = book.tick(now: minute + 3)
        #expect(after.contains(.announce(deviceID: "cam-1", message: "lease of ana released: the lease ran out")))
        let boAgain = book.lock("cam-1", by: "bo", seconds: 60, session: nil, now: minute + 4)
        #expect((try? boAgain.result.get())?.holder == "bo")
    }

    @Test func aChangeBegins_onlyForTheLeaseHolder() {
        var book = LeaseBook()
        _ = book.lock("cam-1", by: "ana", seconds: 60, session: nil, now: 0)
        #expect(book.beginChange("cam-1", by: "bo", now: 1) == .failure(.heldByAnother(Lease(deviceID: "cam-1", holder: "ana", expiresAt: minute))))
        #expect(book.beginChange("cam-2", by: "ana", now: 1) == .failure(.notHeld(deviceID: "cam-2")))
    }
}
