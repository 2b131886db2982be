import FleetBus
import FleetCore
import FleetProtocol
import FleetStore
import Foundation
import Logging

/// The operator door: reads the operator endpoint, opens each request's framing, decodes it,
/// identifies who asks (the connection's key, never the request's own `operator` field),
/// checks their role, notes their session for the leases, and hands the request to the
/// handler of its topic. The dashboard comes in through `answer`, past the same checks, so
/// roles, refusals and audit cannot differ between the CLI and the browser.
///
/// Every request gets a reply with a status and a reason; what a request changes is audited
/// by the handler that changes it.
struct OperatorRouter: Sendable {
    static let endpointName = "operator"

    let endpoint: RouterEndpoint
    let authorization: OperatorAuthorization
    let leases: LeaseKeeper
    let rejections: RejectionCounter
    let handlers: OperatorHandlers
    let logger: Logger

    /// Requests are handled concurrently: a snapshot waiting for its frame must not hold up
    /// someone else's listing.
    func serve() async {
        await withDiscardingTaskGroup { group in
            for await message in endpoint.messages {
                group.addTask { await handle(message) }
            }
        }
    }

    func handle(_ routed: RoutedMessage) async {
        // A REQ socket's request comes after an empty delimiter; its reply must too.
        let opened = OperatorFraming.open(routed.parts.map(\.array))
        let framing = opened.framing
        guard let bytes = opened.request, !routed.overflowed else {
            rejections.reject(endpoint: Self.endpointName, reason: .wrongPartCount, peer: routed.peer)
            send(
                .with {
                    $0.status = .failure(
                        .badRequest,
                        "an operator request is one part (an OperatorRequest) from a DEALER, "
                            + "or an empty delimiter and that part from a REQ socket; this message had \(routed.parts.count) part(s)")
                }, to: routed, framing: framing)
            return
        }
        // Undecodable input is counted and answered: the sender's mistake, not ours.
        guard let request = try? Capfleet_V1_OperatorRequest(serializedBytes: bytes) else {
            rejections.reject(endpoint: Self.endpointName, reason: .undecodable, peer: routed.peer)
            send(
                .with { $0.status = .failure(.badRequest, "not an OperatorRequest; is the CLI the same version as the coordinator?") }, to: routed,
                framing: framing)
            return
        }
        guard case let .operator(name)? = Principal(userID: routed.userID) else {
            rejections.reject(
                endpoint: Self.endpointName, reason: .wrongIdentity, peer: routed.peer,
                detail: "a request from a connection that is not an operator's")
            send(
                .with {
                    $0.requestID = request.requestID
                    $0.status = .failure(.permissionDenied, "this connection is not an operator's")
                }, to: routed, framing: framing)
            return
        }
        let (reply, payload) = await answer(request, from: OperatorCaller(name: name, channel: .operatorEndpoint, peer: routed.peer))
        send(reply, to: routed, framing: framing, payload: payload)
    }

    /// One request answered for an operator already identified (by the key on the operator
    /// endpoint, or by a dashboard session): the role is checked against the operator's
    /// record now, and what the request changes is audited under `caller.actor`.
    func answer(_ request: Capfleet_V1_OperatorRequest, from caller: OperatorCaller) async -> (reply: Capfleet_V1_OperatorReply, payload: [UInt8]?) {
        var reply = Capfleet_V1_OperatorReply()
        reply.requestID = request.requestID
        guard let account = await authorization.authorize(request, from: caller, into: &reply) else {
            return (reply, nil)
        }
        await leases.heard(session: request.sessionID, timeoutMilliseconds: request.sessionTimeoutMs)
        var payload: [UInt8]?
        do {
            if let body = request.body {
                payload = try await dispatch(body, of: request, by: account, as: caller, into: &reply)
            } else {
                rejections.reject(endpoint: caller.endpointName, reason: .unknownMessage, peer: caller.peer)
                reply.status = .failure(.badRequest, "the request carries no body this coordinator knows; is the CLI newer than the coordinator?")
            }
        } catch {
            logger.error("operator request failed", metadata: ["error": "\(error)"])
            reply.status = .failure(.internal, "\(error)")
        }
        return (reply, payload)
    }

    /// The dashboard's live view of one device, for a caller who may see its frames (as
    /// `GetLatestFrame`): see `FrameHandler.watchLive`.
    func watchLive(
        _ deviceID: String, as caller: OperatorCaller, patience: Duration = .seconds(10),
        each: @escaping @Sendable (IngestedFrame) async -> Bool
    ) async -> Capfleet_V1_Status {
        var reply = Capfleet_V1_OperatorReply()
        let asked = Capfleet_V1_OperatorRequest.with { $0.getLatestFrame = .with { $0.deviceID = deviceID } }
        guard await authorization.authorize(asked, from: caller, into: &reply) != nil else { return reply.status }
        return await handlers.frames.watchLive(deviceID, patience: patience, each: each)
    }

    /// What the dashboard's live feed reads once a tick for every browser (its sessions were
    /// checked when they opened the feed).
    func dashboardFleet() async throws(StoreError) -> Capfleet_V1_OperatorReply {
        try await handlers.listings.dashboardFleet()
    }

    private func send(_ reply: Capfleet_V1_OperatorReply, to routed: RoutedMessage, framing: OperatorFraming, payload: [UInt8]? = nil) {
        let bytes: [UInt8]
        do {
            bytes = try reply.serializedBytes()
        } catch {
            // Every request gets a reply: one that cannot be encoded becomes a failure that can.
            logger.error("an operator reply could not be encoded", metadata: ["error": "\(error)"])
            var failure = Capfleet_V1_OperatorReply()
            failure.requestID = reply.requestID
            failure.status = .failure(.internal, "the coordinator could not encode its reply: \(error)")
            guard let fallback: [UInt8] = try? failure.serializedBytes() else { return }  // logged just above
            endpoint.reply(to: routed.routingID, parts: framing.wrap([fallback]))
            return
        }
        endpoint.reply(to: routed.routingID, parts: framing.wrap(payload.map { [bytes, $0] } ?? [bytes]))
    }
}
