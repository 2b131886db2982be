import FleetBus
import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// Who may ask what, and the admin's requests: revocation, operators (enrollment tokens are
/// OperatorHandler+Enrollment).
extension OperatorHandler {
    /// The caller's operator record if their role allows the request; otherwise the reply
    /// says which role it needed, and the refusal is counted and audited.
    func authorize(
        _ request: Capfleet_V1_OperatorRequest, from caller: OperatorCaller,
        into reply: inout Capfleet_V1_OperatorReply
    ) async -> OperatorRecord? {
        let what = Self.requestName(request.body)
        let name = caller.name
        let record: OperatorRecord?
        do {
            if let known = caller.account { record = known } else { record = try await store.operatorRecord(named: name) }
        } catch {
            reply.status = .failure(.internal, "\(error)")
            return nil
        }
        let needed = RequiredRole.of(request.body)
        guard let record, let role = OperatorRole(rawValue: record.role) else {
            await refuse(caller, what, needed: needed, detail: "operator \(name) was removed", into: &reply)
            return nil
        }
        guard role >= needed else {
            await refuse(
                caller, what, needed: needed,
                detail: "\(what) needs the \(needed.rawValue) role; \(name) is \(role == .admin ? "an" : "a") \(role.rawValue)",
                into: &reply)
            return nil
        }
        return record
    }

    private func refuse(
        _ caller: OperatorCaller, _ what: String, needed: OperatorRole, detail: String,
        into reply: inout Capfleet_V1_OperatorReply
    ) async {
        rejections.reject(endpoint: caller.endpointName, reason: .forbidden, peer: caller.peer, detail: detail)
        reply.status = .failure(.permissionDenied, detail)
        reply.neededRole = needed.wire
        // Every refusal is evidence: audited each time, not rate-limited like malformed input.
        do {
            try await store.appendAudit(
                AuditEntry(
                    at: clock.unixMilliseconds(), actor: caller.actor, action: "access.denied", target: what,
                    outcome: "refused", detail: "forbidden: \(detail)"))
        } catch {
            logger.error("cannot audit a refused request", metadata: ["operator": "\(caller.actor)", "error": "\(error)"])
        }
    }

    /// `changeZoom`, `listNodes`…: the request's name for replies and the audit log.
    static func requestName(_ body: Capfleet_V1_OperatorRequest.OneOf_Body?) -> String {
        guard let body else { return "an empty request" }
        let text = String(describing: body)
        return String(text.prefix { $0 != "(" })
    }

    static func info(_ record: OperatorRecord) -> Capfleet_V1_OperatorInfo {
        .with {
            $0.name = record.name
            $0.role = OperatorRole(rawValue: record.role)?.wire ?? .unspecified
            $0.publicKey = record.publicKey
            $0.addedUnixMs = record.addedAt
            $0.addedBy = record.addedBy
        }
    }

    func revoke(_ query: Capfleet_V1_RevokeNode, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        // Operators know nodes by name as often as by id.
        var nodeID = query.nodeID
        if try await store.node(nodeID) == nil, let named = try await store.nodes().first(where: { $0.name == query.nodeID }) {
            nodeID = named.id
        }
        let now = clock.unixMilliseconds()
        let reason = query.reason.trimmingCharacters(in: .whitespaces)
        let revoked = try await store.revokeNode(
            nodeID, by: who, reason: reason, at: now,
            audit: AuditEntry(
                at: now, actor: who, action: "node.revoke", target: nodeID, outcome: "ok",
                detail: reason.isEmpty ? "no reason given" : reason))
        guard !revoked.isEmpty else {
            reply.status = .failure(.notFound, "node \(query.nodeID) has no enrolled key to revoke (see capfleet nodes)")
            return
        }
        await control.revoked(nodeID: nodeID, keys: revoked.map(\.publicKey), reason: reason)
        events.emit(.nodeRevoked, nodeID: nodeID, message: "\(who) revoked node \(nodeID)" + (reason.isEmpty ? "" : ": \(reason)"))
        logger.notice("node revoked", metadata: ["node.id": "\(nodeID)", "by": "\(who)"])
        reply.status = .ok
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
        await leases.admitted(holder(query.name))
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
        if removed { await leases.releaseAll(heldBy: holder(name), detail: "operator \(name) was removed by \(who)") }
        reply.status = removed ? .ok : .failure(.notFound, "no operator \(name) (see capfleet operator list)")
    }
}

/// Who asks, already identified, and the way they came: the operator endpoint (a CURVE key)
/// or the web dashboard (a signed-in browser session). The role is looked up by name for
/// every request either way, so removing an operator or changing their role takes at once.
struct OperatorCaller: Sendable, Equatable {
    enum Channel: Sendable, Equatable {
        case operatorEndpoint
        case dashboard
    }

    var name: String
    var channel: Channel
    /// The peer's address, for the rejection counts.
    var peer: String
    /// The operator's record as read with the caller's dashboard session a moment before this
    /// request, so a grid's previews cost one store read each, not two; nil reads it here.
    var account: OperatorRecord? = nil

    /// Where refusals are counted.
    var endpointName: String { channel == .dashboard ? "dashboard" : OperatorHandler.endpointName }

    /// How the audit log names who acted: "ana", or "ana via dashboard".
    var actor: String { channel == .dashboard ? "\(name) via dashboard" : name }
}
