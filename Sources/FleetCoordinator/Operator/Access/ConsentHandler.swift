import FleetCore
import FleetProtocol
import FleetStore
import Foundation
import Logging

/// Consent: recorded first (state, history, audit in one transaction), then pushed to the
/// device's agent, which enforces it from its next frame. An offline agent gets it when it
/// registers again, and until then enforces what it was last told.
///
/// An actor: it holds which change each device's agent is still to be told, so that pushes
/// to one device go out in order and a superseded one not at all.
actor ConsentHandler {
    let store: FleetDatabase
    let agents: any AgentCommands
    /// A denial stops the device's part of any take at once.
    let takes: TakeDirector
    let events: FleetEvents
    let clock: CoordinatorClock
    let logger: Logger
    /// Which consent change each device's agent is still to be told.
    var consentRelay = ConsentRelay()
    /// The last consent push to each device, which the next one waits for.
    var consentPushes: [String: Task<Capfleet_V1_CommandReply?, Never>] = [:]

    init(store: FleetDatabase, agents: any AgentCommands, takes: TakeDirector, events: FleetEvents, clock: CoordinatorClock, logger: Logger) {
        self.store = store
        self.agents = agents
        self.takes = takes
        self.events = events
        self.clock = clock
        self.logger = logger
    }

    func changeConsent(
        _ query: Capfleet_V1_ChangeConsent, by account: OperatorRecord, actor: String, into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        guard let action = ConsentAction(wire: query.action) else {
            reply.status = .failure(.badRequest, "say what to do: grant, deny, revoke or restrict")
            return
        }
        guard let device = try await store.existingDevice(query.deviceID, into: &reply) else { return }
        let role = OperatorRole(rawValue: account.role) ?? .viewer
        let now = clock.unixMilliseconds()
        let change: ConsentChange
        switch try await store.changeConsent(deviceID: device.id, action: action, role: role, actor: actor, reason: query.reason, at: now) {
        case let .failure(refusal):
            reply.status = .failure(refusal.neededRole == nil ? .badRequest : .permissionDenied, refusal.description)
            if let needed = refusal.neededRole { reply.neededRole = needed.wire }
            return
        case let .success(recorded):
            change = recorded
        }
        reply.consentHistory = [Self.wire(change)]
        let state = ConsentState(rawValue: change.toState) ?? .notDetermined
        events.emit(
            .consentChanged, nodeID: device.nodeId, deviceID: device.id,
            message: "\(actor) \(Self.pastTense(action)) consent: \(change.fromState) → \(change.toState) (\(query.reason))")
        let command = Capfleet_V1_Command.OneOf_Action.setConsent(
            .with {
                $0.state = state.wire
                $0.reason = query.reason
                $0.changedUnixMs = now
            })
        let answer = await push(command, change: change.id ?? 0, to: device)
        reply.consentApplied = answer.map { $0.status.isOK && $0.consent == state.wire } ?? false
        // A denial stops the device's part of any take at once, recorded in the take.
        if !state.allowsRealFrames { await takes.consentWithdrawn(deviceID: device.id, state: state.rawValue, reason: query.reason) }
        guard let answer else {
            logger.notice(
                "consent recorded; a later change was recorded before its push, and is pushed instead", metadata: ["device.id": "\(device.id)"])
            reply.status = .ok
            return
        }
        if !reply.consentApplied {
            logger.warning(
                "consent recorded but not yet enforced by the agent",
                metadata: [
                    "device.id": "\(device.id)", "reason": "\(answer.status.reason)",
                ])
        }
        reply.status = .ok
    }

    /// Pushes a recorded change once the device's earlier pushes are answered, and only if it
    /// is still the newest then (`ConsentRelay`); nil if a later change superseded it.
    private func push(_ command: Capfleet_V1_Command.OneOf_Action, change changeID: Int64, to device: DeviceRecord) async -> Capfleet_V1_CommandReply?
    {
        consentRelay.recorded(changeID, of: device.id)
        let previous = consentPushes[device.id]
        let turn = Task { () -> Capfleet_V1_CommandReply? in
            _ = await previous?.value
            guard self.consentRelay.shouldPush(changeID, of: device.id) else { return nil }
            return await self.agents.command(command, on: device)
        }
        consentPushes[device.id] = turn
        let answer = await turn.value
        if consentPushes[device.id] == turn { consentPushes[device.id] = nil }
        return answer
    }

    func consentHistory(of deviceID: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        let history = try await store.consentHistory(deviceID: deviceID)
        if history.isEmpty, try await store.device(deviceID) == nil {
            reply.status = .failure(.notFound, "no device \(deviceID) and no consent history for it; see capfleet devices")
            return
        }
        reply.consentHistory = history.map(Self.wire)
        reply.status = .ok
    }

    static func wire(_ change: ConsentChange) -> Capfleet_V1_ConsentRecord {
        .with {
            $0.unixMs = change.at
            $0.actor = change.actor
            $0.action = ConsentAction(rawValue: change.action)?.wire ?? .unspecified
            $0.fromState = (ConsentState(rawValue: change.fromState) ?? .notDetermined).wire
            $0.toState = (ConsentState(rawValue: change.toState) ?? .notDetermined).wire
            $0.reason = change.reason
            $0.deviceID = change.deviceId
        }
    }

    static func pastTense(_ action: ConsentAction) -> String {
        switch action {
        case .grant: "granted"
        case .deny: "denied"
        case .revoke: "revoked"
        case .restrict: "restricted"
        }
    }
}
