import FleetCore
import FleetHTTP
import FleetProtocol
import FleetStore

/// The web dashboard's sign-in links and sessions, asked for over the operator endpoint
/// (`capfleet dashboard login|sessions|revoke`); the browser side is `DashboardRoutes`.
struct DashboardAccessHandler: Sendable {
    let store: FleetDatabase
    /// Where the dashboard is served: a sign-in link names its port.
    let ports: Capfleet_V1_CoordinatorEndpoints
    let clock: CoordinatorClock

    func createDashboardSignIn(
        _ query: Capfleet_V1_CreateDashboardSignIn, by account: OperatorRecord, actor: String,
        into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        let target = query.operatorName.isEmpty ? account.name : query.operatorName
        let now = clock.unixMilliseconds()
        if target != account.name, OperatorRole(rawValue: account.role) != .admin {
            let detail =
                "a sign-in link for another operator (\(target)) needs the admin role; \(account.name) is \(account.role == "operator" ? "an" : "a") \(account.role)"
            try await store.appendAudit(
                AuditEntry(
                    at: now, actor: actor, action: "access.denied", target: "CreateDashboardSignIn",
                    outcome: "refused", detail: "forbidden: \(detail)"))
            reply.status = .failure(.permissionDenied, detail)
            reply.neededRole = OperatorRole.admin.wire
            return
        }
        guard ports.httpPort != 0 else {
            reply.status = .failure(.unsupported, "this coordinator serves no dashboard (its http_port is off)")
            return
        }
        let token = WebSecret.make()
        let expires = now + DashboardAccess.signInLinkLifetime
        do throws(StoreError) {
            try await store.addDashboardSignIn(
                DashboardSignInRecord(tokenHash: WebSecret.hash(token), operatorName: target, createdAt: now, expiresAt: expires, createdBy: actor),
                audit: AuditEntry(
                    at: now, actor: actor, action: "dashboard.link", target: target, outcome: "ok",
                    detail: "a one-time sign-in link, valid until \(expires)"))
        } catch {
            if case let .refused(reason) = error {
                reply.status = .failure(.notFound, reason)
                return
            }
            throw error
        }
        reply.dashboardSignIn = .with {
            $0.operatorName = target
            $0.path = "/signin?token=\(token)"
            $0.expiresUnixMs = expires
            $0.httpPort = ports.httpPort
            $0.tls = ports.httpTls
        }
        reply.status = .ok
    }

    func listDashboardSessions(_ query: Capfleet_V1_ListDashboardSessions, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        reply.dashboardSessions = try await store.dashboardSessions(includingEnded: query.includeEnded, now: clock.unixMilliseconds())
            .map(Self.info)
        reply.status = .ok
    }

    func endDashboardSession(
        _ query: Capfleet_V1_EndDashboardSession, by actor: String,
        into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        let now = clock.unixMilliseconds()
        let ended = try await store.endDashboardSession(
            query.sessionID, by: actor, at: now,
            audit: AuditEntry(
                at: now, actor: actor, action: "dashboard.session_end",
                target: query.sessionID, outcome: "ok", detail: "revoked"))
        guard ended else {
            reply.status = .failure(.notFound, "no live dashboard session \(query.sessionID); see capfleet dashboard sessions")
            return
        }
        reply.dashboardSessions = try await store.dashboardSessions(includingEnded: true, now: now).filter { $0.id == query.sessionID }.map(Self.info)
        reply.status = .ok
    }

    static func info(_ session: DashboardSessionRecord) -> Capfleet_V1_DashboardSessionInfo {
        .with {
            $0.id = session.id
            $0.operatorName = session.operatorName
            $0.createdUnixMs = session.createdAt
            $0.expiresUnixMs = session.expiresAt
            $0.lastSeenUnixMs = session.lastSeenAt
            $0.endedUnixMs = session.endedAt ?? 0
            $0.endedBy = session.endedBy ?? ""
            $0.peer = session.peer
            $0.userAgent = session.userAgent
        }
    }
}
