import FleetBus
import FleetCore
import FleetProtocol
import FleetStore
import Foundation
import Logging

/// The admin's requests on who may come in: operators added and removed, enrollment tokens
/// made, listed and revoked (AccessHandler+Enrollment).
struct AccessHandler: Sendable {
    let store: FleetDatabase
    /// A removed operator's leases go with them.
    let leases: LeaseKeeper
    /// Enrollment tokens carry the coordinator's key.
    let coordinatorKey: CurvePublicKey
    let clock: CoordinatorClock
    let logger: Logger

    static func info(_ record: OperatorRecord) -> Capfleet_V1_OperatorInfo {
        .with {
            $0.name = record.name
            $0.role = OperatorRole(rawValue: record.role)?.wire ?? .unspecified
            $0.publicKey = record.publicKey
            $0.addedUnixMs = record.addedAt
            $0.addedBy = record.addedBy
        }
    }

    func addOperator(_ query: Capfleet_V1_AddOperator, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        guard AccessNames.isValid(query.name) else {
            reply.status = .failure(.badRequest, AccessNames.rule)
            return
        }
        guard let role = OperatorRole(wire: query.role) else {
            reply.status = .failure(.badRequest, "give the operator a role: viewer, operator or admin")
            return
        }
        guard let key = CurvePublicKey(bytes: Array(query.publicKey)) else {
            reply.status = .failure(.badRequest, "an operator's public key is 32 bytes (40 Z85 characters)")
            return
        }
        let now = clock.unixMilliseconds()
        let record = OperatorRecord(name: query.name, publicKey: key.z85, role: role.rawValue, addedAt: now, addedBy: who)
        do {
            try await store.saveOperator(
                record,
                audit: AuditEntry(
                    at: now, actor: who, action: "operator.add", target: query.name,
                    outcome: "ok", detail: "\(role.rawValue), key \(key.fingerprint)…"))
        } catch let error where { if case .refused = error { true } else { false } }() {
            reply.status = .failure(.badRequest, error.description)
            return
        }
        await leases.admitted(OperatorCaller.holder(query.name))
        reply.operators = [Self.info(record)]
        reply.status = .ok
    }

    /// The last-admin rule is the store's to apply, in the transaction that removes. The
    /// leases go after: a lock of theirs decided in between is released with the rest, and
    /// one decided later is refused.
    func removeOperator(_ name: String, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        let removed: Bool
        do {
            removed = try await store.removeOperator(
                name,
                audit: AuditEntry(
                    at: clock.unixMilliseconds(), actor: who, action: "operator.remove",
                    target: name, outcome: "ok"))
        } catch let error where { if case .refused = error { true } else { false } }() {
            reply.status = .failure(.unsupported, error.description)
            return
        }
        if removed { await leases.releaseAll(heldBy: OperatorCaller.holder(name), detail: "operator \(name) was removed by \(who)") }
        reply.status = removed ? .ok : .failure(.notFound, "no operator \(name) (see capfleet operator list)")
    }
}
