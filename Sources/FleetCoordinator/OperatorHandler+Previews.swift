import FleetCore
import FleetProtocol

/// Previews as the coordinator keeps them (frames.md, "Previews"): the latest of a device, or
/// of every device for a contact sheet. Answered from memory, without asking any agent.
extension OperatorHandler {
    func preview(of deviceID: String, into reply: inout Capfleet_V1_OperatorReply) {
        guard ingest.state(of: deviceID) != nil else {
            reply.status = .failure(.notFound, "no device \(deviceID) is registered; see capfleet devices")
            return
        }
        guard let shelved = ingest.previews.latest(of: deviceID) else {
            reply.status = .failure(
                .notFound,
                "device \(deviceID) has sent no preview since the coordinator started: its agent sends "
                    + "one a second while the device captures, unless its previews are off (agent setting preview) or its pixel format "
                    + "cannot be pictured (the agent's log says so)")
            return
        }
        reply.previews = [shelved.wire(atUnixMilliseconds: clock.unixMilliseconds())]
        reply.status = .ok
    }

    /// Every device's latest preview (of `nodeID`'s devices), by device id.
    func listPreviews(nodeID: String?, into reply: inout Capfleet_V1_OperatorReply) {
        let now = clock.unixMilliseconds()
        reply.previews = ingest.previews.all()
            .filter { nodeID == nil || $0.value.header.nodeID == nodeID }
            .sorted { $0.key < $1.key }
            .map { $0.value.wire(atUnixMilliseconds: now) }
        reply.status = .ok
    }
}
