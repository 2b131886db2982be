import FleetBus
import FleetCore
import FleetProtocol
import Foundation
import Testing

@testable import FleetCoordinator
@testable import FleetStore

/// The access handlers on an in-memory store: operators, enrollment tokens, nodes revoked
/// and forgotten, and the dashboard's sign-in links and sessions.
@Suite(.timeLimit(.minutes(1))) struct AccessHandlerTests {
    @Test func addingAnOperator_checksNameRoleAndKey_thenStoresAndAuditsThem() async throws {
        let bed = try await OperatorBed()
        let key = try CurveKeyPair.generate().publicKey
        var badName = Capfleet_V1_OperatorReply()
        try await bed.handlers.access.addOperator(
            .with {
                $0.name = "no spaces please"
                $0.role = .viewer
                $0.publicKey = Data(key.bytes)
            }, by: "ana", into: &badName)
        #expect(badName.status.code == .badRequest)
        #expect(badName.status.reason == AccessNames.rule)
        var badKey = Capfleet_V1_OperatorReply()
        try await bed.handlers.access.addOperator(
            .with {
                $0.name = "zed"
                $0.role = .viewer
                $0.publicKey = Data([1, 2, 3])
            }, by: "ana", into: &badKey)
        #expect(badKey.status.reason == "an operator's public key is 32 bytes (40 Z85 characters)")

        var added = Capfleet_V1_OperatorReply()
        try await bed.handlers.access.addOperator(
            .with {
                $0.name = "zed"
                $0.role = .viewer
                $0.publicKey = Data(key.bytes)
            }, by: "ana", into: &added)
        #expect(added.status.code == .ok, "\(added.status)")
        #expect(added.operators.map(\.name) == ["zed"])
        #expect(try await bed.store.operatorRecord(named: "zed")?.publicKey == key.z85)
        let audit = try await bed.audit("operator.add").filter { $0.target == "zed" }
        #expect(audit.map(\.actor) == ["ana"])
        #expect(audit.first?.detail.hasPrefix("viewer, key ") == true)
        await bed.close()
    }

    @Test func removingAnOperator_releasesTheirLeases_theLastAdminStays_andAnUnknownOneIsNotFound() async throws {
        let bed = try await OperatorBed()
        var locked = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.lock(.with { $0.deviceID = "cam-1" }, by: "otto", session: nil, into: &locked)
        #expect(await bed.leases.lease(of: "cam-1")?.holder == "otto")

        var removed = Capfleet_V1_OperatorReply()
        try await bed.handlers.access.removeOperator("otto", by: "ana", into: &removed)
        #expect(removed.status.code == .ok)
        #expect(try await bed.store.operatorRecord(named: "otto") == nil)
        #expect(await bed.leases.lease(of: "cam-1") == nil)

        var lastAdmin = Capfleet_V1_OperatorReply()
        try await bed.handlers.access.removeOperator("ana", by: "ana", into: &lastAdmin)
        #expect(lastAdmin.status.code == .unsupported)
        #expect(try await bed.store.operatorRecord(named: "ana") != nil)

        var unknown = Capfleet_V1_OperatorReply()
        try await bed.handlers.access.removeOperator("zed", by: "ana", into: &unknown)
        #expect(unknown.status.code == .notFound)
        #expect(unknown.status.reason == "no operator zed (see capfleet operator list)")
        await bed.close()
    }

    @Test func anEnrollmentToken_isMadeListedAndRevoked_andMayNotLiveAWeek() async throws {
        let bed = try await OperatorBed()
        var tooLong = Capfleet_V1_OperatorReply()
        try await bed.handlers.access.createEnrollment(
            .with {
                $0.name = "rig-1"
                $0.validSeconds = 8 * 24 * 3600
            }, by: "ana", into: &tooLong)
        #expect(tooLong.status.code == .badRequest)
        #expect(tooLong.status.reason == "a token may live at most 7 days (604800 s): a long-lived token is a standing invitation")

        var made = Capfleet_V1_OperatorReply()
        try await bed.handlers.access.createEnrollment(.with { $0.name = "rig-1" }, by: "ana", into: &made)
        #expect(made.status.code == .ok, "\(made.status)")
        #expect(!made.enrollmentToken.isEmpty)
        #expect(made.enrollmentExpiresUnixMs == OperatorBed.now + 3_600_000)
        let key = try #require(made.enrollmentTokens.first?.tokenKey)

        var listed = Capfleet_V1_OperatorReply()
        try await bed.handlers.access.listEnrollments(.init(), into: &listed)
        #expect(listed.enrollmentTokens.map(\.state) == [.open])

        var revoked = Capfleet_V1_OperatorReply()
        try await bed.handlers.access.revokeEnrollment(
            .with {
                $0.tokenKey = key
                $0.reason = "rig cancelled"
            }, by: "ana", into: &revoked)
        #expect(revoked.status.code == .ok, "\(revoked.status)")
        #expect(revoked.enrollmentTokens.first?.state == .revoked)
        #expect(try await bed.audit("enroll.token.revoke").first?.detail.hasSuffix(": rig cancelled") == true)

        var unknown = Capfleet_V1_OperatorReply()
        try await bed.handlers.access.revokeEnrollment(.with { $0.tokenKey = "nosuchkey" }, by: "ana", into: &unknown)
        #expect(unknown.status.code == .notFound)
        #expect(unknown.status.reason.hasSuffix(" (see capfleet enroll list --all)"))
        await bed.close()
    }

    @Test func forgettingAnOnlineNode_isRefusedAndAudited_anOfflineOneIsRemoved() async throws {
        let bed = try await OperatorBed()
        var refused = Capfleet_V1_OperatorReply()
        try await bed.handlers.nodeAccess.forget("node-a", by: "ana", into: &refused)
        #expect(refused.status.code == .unsupported)
        #expect(refused.status.reason == "node node-a is online or registering; stop its agent before forgetting it")
        #expect(try await bed.audit("node.forget").map(\.outcome) == ["refused"])
        #expect(try await bed.store.node("node-a") != nil)

        // The agent stopped: the control handler and the store both have the node offline.
        await bed.agents.setOnline("node-a", false)
        try await bed.store.markAllNodesOffline(at: OperatorBed.now)
        var forgotten = Capfleet_V1_OperatorReply()
        try await bed.handlers.nodeAccess.forget("node-a", by: "ana", into: &forgotten)
        #expect(forgotten.status.code == .ok, "\(forgotten.status)")
        #expect(try await bed.store.node("node-a") == nil)
        #expect(try await bed.store.device("cam-1") == nil)
        #expect(try await bed.audit("node.forget").map(\.detail).last == "removed 2 device(s)")
        #expect(await bed.agents.removals.map(\.removed) == [true])
        await bed.close()
    }

    @Test func revokingANode_byItsName_tellsTheControlHandler_andAnUnknownNodeIsNotFound() async throws {
        let bed = try await OperatorBed()
        let token = try CurveKeyPair.generate()
        let nodeKey = try CurveKeyPair.generate()
        try await bed.store.createEnrollmentToken(
            EnrollmentTokenRecord(
                publicKey: token.publicKey.z85, name: "kilo", createdBy: "test", createdAt: OperatorBed.now, expiresAt: OperatorBed.now + 600_000),
            audit: AuditEntry(at: OperatorBed.now, actor: "test", action: "token.create", target: "kilo", outcome: "ok"))
        _ = try await bed.store.enroll(tokenKey: token.publicKey.z85, nodeKey: nodeKey.publicKey.z85, nodeID: "node-k", at: OperatorBed.now) {
            _, _ in
            AuditEntry(at: OperatorBed.now, actor: "test", action: "node.enroll", target: "node-k", outcome: "ok")
        }
        var revoked = Capfleet_V1_OperatorReply()
        try await bed.handlers.nodeAccess.revoke(
            .with {
                $0.nodeID = "node-k"
                $0.reason = "stolen laptop"
            }, by: "ana", into: &revoked)
        #expect(revoked.status.code == .ok, "\(revoked.status)")
        #expect(await bed.agents.revocations.map(\.nodeID) == ["node-k"])
        #expect(try await bed.audit("node.revoke").map(\.detail) == ["stolen laptop"])
        #expect(bed.events.recent(limit: 10).contains { $0.message == "ana revoked node node-k: stolen laptop" })

        var unknown = Capfleet_V1_OperatorReply()
        try await bed.handlers.nodeAccess.revoke(.with { $0.nodeID = "node-z" }, by: "ana", into: &unknown)
        #expect(unknown.status.code == .notFound)
        #expect(unknown.status.reason == "node node-z has no enrolled key to revoke (see capfleet nodes)")
        await bed.close()
    }

    @Test func aSignInLinkForAnotherOperator_needsAdmin_andIsAuditedEitherWay() async throws {
        let bed = try await OperatorBed()
        var refused = Capfleet_V1_OperatorReply()
        try await bed.handlers.dashboardAccess.createDashboardSignIn(
            .with { $0.operatorName = "vic" }, by: try await bed.account("otto"), actor: "otto", into: &refused)
        #expect(refused.status.code == .permissionDenied)
        #expect(refused.status.reason == "a sign-in link for another operator (vic) needs the admin role; otto is an operator")
        #expect(refused.neededRole == .admin)
        #expect(try await bed.audit("access.denied").map(\.target) == ["CreateDashboardSignIn"])

        var link = Capfleet_V1_OperatorReply()
        try await bed.handlers.dashboardAccess.createDashboardSignIn(
            .with { $0.operatorName = "vic" }, by: try await bed.account("ana"), actor: "ana", into: &link)
        #expect(link.status.code == .ok, "\(link.status)")
        #expect(link.dashboardSignIn.path.hasPrefix("/signin?token="))
        #expect(link.dashboardSignIn.httpPort == 8080)
        #expect(try await bed.audit("dashboard.link").map(\.target) == ["vic"])
        await bed.close()
    }

    @Test func withoutAnHTTPPort_noSignInLinkIsMade_andAnUnknownSessionCannotBeEnded() async throws {
        let bed = try await OperatorBed(httpPort: 0)
        var link = Capfleet_V1_OperatorReply()
        try await bed.handlers.dashboardAccess.createDashboardSignIn(.init(), by: try await bed.account("otto"), actor: "otto", into: &link)
        #expect(link.status.code == .unsupported)
        #expect(link.status.reason == "this coordinator serves no dashboard (its http_port is off)")
        var sessions = Capfleet_V1_OperatorReply()
        try await bed.handlers.dashboardAccess.listDashboardSessions(.init(), into: &sessions)
        #expect(sessions.status.code == .ok)
        #expect(sessions.dashboardSessions.isEmpty)
        var ended = Capfleet_V1_OperatorReply()
        try await bed.handlers.dashboardAccess.endDashboardSession(.with { $0.sessionID = "s-1" }, by: "ana", into: &ended)
        #expect(ended.status.code == .notFound)
        #expect(ended.status.reason == "no live dashboard session s-1; see capfleet dashboard sessions")
        await bed.close()
    }

    @Test func aBackupNoLongerKept_isNotFound_aNewOneIsTakenAndAudited() async throws {
        let bed = try await OperatorBed()
        var gone = Capfleet_V1_OperatorReply()
        try await bed.handlers.backup.backupDatabase(.with { $0.backupID = "backup-1" }, by: "ana", into: &gone)
        #expect(gone.status.code == .notFound)
        #expect(gone.status.reason.hasPrefix("no backup backup-1: it was fetched completely or is older than "))

        var taken = Capfleet_V1_OperatorReply()
        try await bed.handlers.backup.backupDatabase(.init(), by: "ana", into: &taken)
        #expect(taken.status.code == .ok)
        #expect(taken.backup.size > 0)
        #expect(taken.backup.data.count == Int(taken.backup.size))
        #expect(try await bed.audit("database.backup").map(\.target) == [taken.backup.backupID])
        await bed.close()
    }
}

/// Consent on an in-memory store with played agents: recorded, then pushed.
@Suite(.timeLimit(.minutes(1))) struct ConsentHandlerTests {
    @Test func aGrant_isRecordedPushedAndApplied_withTheHistoryToShow() async throws {
        let bed = try await OperatorBed()
        let handler = bed.handlers.consent
        var reply = Capfleet_V1_OperatorReply()
        try await handler.changeConsent(
            .with {
                $0.deviceID = "cam-1"
                $0.action = .grant
                $0.reason = "signed release"
            }, by: try await bed.account("otto"), actor: "otto", into: &reply)
        #expect(reply.status.code == .ok, "\(reply.status)")
        #expect(reply.consentApplied)
        #expect(try await bed.store.consent(deviceID: "cam-1")?.consentState == .authorized)
        guard case let .setConsent(pushed)? = await bed.agents.sent(to: "cam-1").last else {
            Issue.record("the agent must be told the consent")
            return
        }
        #expect(pushed.reason == "signed release")

        var history = Capfleet_V1_OperatorReply()
        try await handler.consentHistory(of: "cam-1", into: &history)
        #expect(history.consentHistory.map(\.actor) == ["otto"])
        #expect(history.consentHistory.first?.toState == .authorized)
        await bed.close()
    }

    @Test func aGrantWhileTheNodeIsOffline_isRecordedButNotYetApplied() async throws {
        let bed = try await OperatorBed(online: false)
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.consent.changeConsent(
            .with {
                $0.deviceID = "cam-2"
                $0.action = .grant
                $0.reason = "signed release"
            }, by: try await bed.account("ana"), actor: "ana", into: &reply)
        #expect(reply.status.code == .ok)
        #expect(!reply.consentApplied)
        #expect(try await bed.store.consent(deviceID: "cam-2")?.consentState == .authorized)
        await bed.close()
    }

    @Test func aChangeWithoutAnAction_isABadRequest_andAnOperatorsRestrictionNeedsAnAdmin() async throws {
        let bed = try await OperatorBed()
        var none = Capfleet_V1_OperatorReply()
        try await bed.handlers.consent.changeConsent(.with { $0.deviceID = "cam-1" }, by: try await bed.account("ana"), actor: "ana", into: &none)
        #expect(none.status.code == .badRequest)
        #expect(none.status.reason == "say what to do: grant, deny, revoke or restrict")

        var restriction = Capfleet_V1_OperatorReply()
        try await bed.handlers.consent.changeConsent(
            .with {
                $0.deviceID = "cam-1"
                $0.action = .restrict
                $0.reason = "site policy"
            }, by: try await bed.account("otto"), actor: "otto", into: &restriction)
        #expect(restriction.status.code == .permissionDenied)
        #expect(restriction.neededRole == .admin)
        #expect(try await bed.store.consent(deviceID: "cam-1")?.consentState != .restricted)
        #expect(await bed.agents.sent(to: "cam-1").isEmpty)

        var unknown = Capfleet_V1_OperatorReply()
        try await bed.handlers.consent.consentHistory(of: "cam-9", into: &unknown)
        #expect(unknown.status.reason == "no device cam-9 and no consent history for it; see capfleet devices")
        await bed.close()
    }
}
