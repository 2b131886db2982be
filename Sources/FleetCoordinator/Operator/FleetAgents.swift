import FleetProtocol
import FleetStore

/// What the operator handlers ask of the agents' side (ControlHandler, over the control
/// endpoint): commands, who is online and what they last reported, and the node removals
/// and revocations the control handler must hear of.
protocol FleetAgents: AgentCommands {
    func liveStatus(of nodeIDs: Set<String>) async -> [String: Capfleet_V1_AgentStatus]
    /// Whether `nodeID` may be removed now; from here it cannot register until `endRemoval`.
    func beginRemoval(_ nodeID: String) async -> Bool
    func endRemoval(_ nodeID: String, removed: Bool) async
    func revoked(nodeID: String, keys: [String], reason: String) async
}

extension ControlHandler: FleetAgents {}

extension AgentCommands {
    /// A command to `device`'s agent, answered within `timeout` (a control change's 3 s unless
    /// said otherwise).
    func command(
        _ action: Capfleet_V1_Command.OneOf_Action, on device: DeviceRecord, timeout: Duration = .seconds(3)
    ) async
        -> Capfleet_V1_CommandReply
    {
        await command(action, deviceID: device.id, nodeID: device.nodeId, timeout: timeout)
    }
}
