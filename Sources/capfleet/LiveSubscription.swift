import FleetBus
import FleetClient
import FleetProtocol

/// A SUB socket on the coordinator's live endpoint (frames.md, "The live endpoint"), what
/// `capfleet view` and `capfleet listen` watch through: the port the coordinator names (or the
/// one given), the operator's key, one topic, `queue` messages waiting at most.
enum LiveSubscription {
    static func open(_ coordinator: CoordinatorOptions, livePort: UInt16?, topic: String, queue: Int, purpose: String) throws -> ZMQSocket {
        let client = try coordinator.client()
        var port = livePort ?? WireDefaults.livePort
        if livePort == nil {
            let named: UInt32
            do {
                named = try client.call(.whoAmI(.init())).reply.endpoints.livePort
            } catch {
                throw CLIFailure(error.description)
            }
            guard named > 0 else {
                throw CLIFailure("the coordinator has no live endpoint (it is older than protocol 1.3); upgrade it to \(purpose)")
            }
            port = UInt16(truncatingIfNeeded: named)
        }
        let host = client.address.host.contains(":") ? "[\(client.address.host)]" : client.address.host
        let credential = try coordinator.loadCredential()
        do {
            let socket = try ZMQSocket(context: ZMQContext(), type: .sub)
            try socket.makeCurveClient(serverKey: credential.coordinatorKey, keys: credential.keys)
            try socket.set([.receiveQueue(messages: Int32(queue))])
            try socket.subscribe(topic)
            try socket.connect("tcp://\(host):\(port)")
            return socket
        } catch {
            throw CLIFailure("cannot subscribe to the coordinator's live endpoint at \(host):\(port): \(error)")
        }
    }
}
