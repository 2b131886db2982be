import FleetBus
import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// The admin's enrollment tokens: made for one node or for many, listed with their uses,
/// revoked (enrollment.md, "Multi-use tokens").
extension AccessHandler {
    func createEnrollment(_ query: Capfleet_V1_CreateEnrollment, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError)
    {
        let spec: EnrollmentTokenSpec
        do {
            spec = try EnrollmentTokenSpec(name: query.name, namePrefix: query.namePrefix, uses: Int(query.uses))
        } catch {
            reply.status = .failure(.badRequest, error.description)
            return
        }
        let seconds = query.validSeconds == 0 ? 3600 : query.validSeconds
        guard seconds <= 7 * 24 * 3600 else {
            reply.status = .failure(.badRequest, "a token may live at most 7 days (604800 s): a long-lived token is a standing invitation")
            return
        }
        let now = clock.unixMilliseconds()
        let issued: (token: EnrollmentToken, expiresAt: Int64)
        do {
            issued = try await LocalAdministration.issueEnrollmentToken(
                store: store, coordinatorKey: coordinatorKey, spec: spec,
                validSeconds: seconds, by: who, at: now)
        } catch let error as StoreError {
            throw error
        } catch {
            reply.status = .failure(.internal, "\(error)")
            return
        }
        reply.enrollmentToken = issued.token.text
        reply.enrollmentExpiresUnixMs = issued.expiresAt
        let record = EnrollmentTokenRecord(
            publicKey: issued.token.keys.publicKey.z85, spec: spec, createdBy: who, createdAt: now,
            expiresAt: issued.expiresAt)
        reply.enrollmentTokens = [Capfleet_V1_EnrollmentTokenInfo(EnrollmentTokenSummary(token: record, uses: []), at: now)]
        reply.status = .ok
    }

    func listEnrollments(_ query: Capfleet_V1_ListEnrollments, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        let now = clock.unixMilliseconds()
        reply.enrollmentTokens = try await store.enrollmentTokens(includeClosed: query.all, at: now).map {
            Capfleet_V1_EnrollmentTokenInfo($0, at: now)
        }
        reply.status = .ok
    }

    func revokeEnrollment(_ query: Capfleet_V1_RevokeEnrollment, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError)
    {
        let now = clock.unixMilliseconds()
        let key = query.tokenKey.trimmingCharacters(in: .whitespaces)
        let reason = query.reason.trimmingCharacters(in: .whitespaces)
        do {
            let revoked = try await store.revokeEnrollmentToken(matching: key, by: who, reason: reason, at: now) { summary in
                let facts = summary.facts
                return AuditEntry(
                    at: now, actor: who, action: "enroll.token.revoke", target: summary.token.name, outcome: "ok",
                    detail: "token \(summary.token.publicKey.prefix(8))…, \(facts.used) of \(facts.uses) use(s) spent, \(facts.remaining) left unused"
                        + (reason.isEmpty ? "" : ": \(reason)"))
            }
            reply.enrollmentTokens = [Capfleet_V1_EnrollmentTokenInfo(revoked, at: now)]
            logger.notice("enrollment token revoked", metadata: ["token": "\(revoked.token.publicKey.prefix(8))", "by": "\(who)"])
            reply.status = .ok
        } catch let error where { if case .notFound = error { true } else { false } }() {
            reply.status = .failure(.notFound, "\(error.description) (see capfleet enroll list --all)")
        } catch let error where { if case .refused = error { true } else { false } }() {
            reply.status = .failure(.badRequest, error.description)
        }
    }

}

extension Capfleet_V1_EnrollmentTokenInfo {
    /// A token as listings show it: never its secret.
    public init(_ summary: EnrollmentTokenSummary, at now: UnixMilliseconds) {
        let token = summary.token, facts = summary.facts
        self = .with {
            $0.tokenKey = token.publicKey
            switch facts.naming {
            case let .fixed(name): $0.name = name
            case let .prefix(prefix): $0.namePrefix = prefix
            }
            $0.uses = UInt32(facts.uses)
            $0.used = UInt32(facts.used)
            $0.remaining = UInt32(facts.remaining)
            $0.state =
                switch facts.state(at: now) {
                case .open: .open
                case .spent: .spent
                case .expired: .expired
                case .revoked: .revoked
                }
            $0.createdUnixMs = token.createdAt
            $0.createdBy = token.createdBy
            $0.expiresUnixMs = token.expiresAt
            $0.revokedUnixMs = token.revokedAt ?? 0
            $0.revokedBy = token.revokedBy ?? ""
            $0.enrollments = summary.uses.map { use in
                .with {
                    $0.number = UInt32(use.number)
                    $0.nodeID = use.nodeId
                    $0.nodeName = use.name
                    $0.unixMs = use.usedAt
                }
            }
        }
    }
}
