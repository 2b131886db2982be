import FleetBus
import FleetCore
import FleetProtocol
import FleetStore
import Foundation
import Logging

/// Nodes shut out: revoked (their keys refused from now on) or forgotten (their rows removed
/// once their agent is stopped). The control handler hears of both at once.
struct NodeAccessHandler: Sendable {
    let store: FleetDatabase
    let agents: any FleetAgents
    /// A forgotten node's devices leave ingest and the live flow.
    let ingest: FrameIngest
    let liveFlow: LiveFlowKeeper
    let events: FleetEvents
    let clock: CoordinatorClock
    let logger: Logger

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
        await agents.revoked(nodeID: nodeID, keys: revoked.map(\.publicKey), reason: reason)
        events.emit(.nodeRevoked, nodeID: nodeID, message: "\(who) revoked node \(nodeID)" + (reason.isEmpty ? "" : ": \(reason)"))
        logger.notice("node revoked", metadata: ["node.id": "\(nodeID)", "by": "\(who)"])
        reply.status = .ok
    }

    func forget(_ nodeID: String, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        let actor = who.isEmpty ? "unknown operator" : who
        let at = clock.unixMilliseconds()
        do throws(StoreError) {
            // Decided by the control handler at once: from here the node cannot register
            // until the removal is done or failed.
            guard await agents.beginRemoval(nodeID) else {
                throw StoreError.refused(reason: "node \(nodeID) is online or registering; stop its agent before forgetting it")
            }
            let devices: [String]
            do throws(StoreError) {
                devices = try await store.devices(nodeID: nodeID).map(\.id)
                try await store.forgetNode(nodeID)
            } catch {
                await agents.endRemoval(nodeID, removed: false)
                throw error
            }
            await agents.endRemoval(nodeID, removed: true)
            ingest.forget(deviceIDs: devices)
            await liveFlow.forgotten(devices)
            try await store.appendAudit(
                AuditEntry(
                    at: at, actor: actor, action: "node.forget", target: nodeID, outcome: "ok",
                    detail: "removed \(devices.count) device(s)"))
            reply.status = .ok
        } catch {
            let (code, outcome): (Capfleet_V1_StatusCode, String) =
                switch error {
                case .notFound: (.notFound, "refused")
                case .refused: (.unsupported, "refused")
                default: (.internal, "failed")
                }
            try await store.appendAudit(
                AuditEntry(
                    at: at, actor: actor, action: "node.forget", target: nodeID, outcome: outcome,
                    detail: error.description))
            reply.status = .failure(code, error.description)
        }
    }
}
