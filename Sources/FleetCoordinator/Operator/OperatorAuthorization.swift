import FleetCore
import FleetProtocol
import FleetStore
import Logging

/// Who may ask what: the caller's role, read from their operator record for every request,
/// against the role the request needs (`RequiredRole`). A refusal is counted and audited.
struct OperatorAuthorization: Sendable {
    let store: FleetDatabase
    let rejections: RejectionCounter
    let clock: CoordinatorClock
    let logger: Logger

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
}
