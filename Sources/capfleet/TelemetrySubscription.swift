import FleetBus
import FleetClient
import FleetProtocol

/// A SUB socket on the coordinator's telemetry endpoint, for the commands that follow it
/// (`events --follow`, `metadata`): CURVE with the operator's credential, on the port the
/// coordinator names (an older one that cannot say: the default), subscribed to `topic`.
enum TelemetrySubscription {
    static func open(_ coordinator: CoordinatorOptions, client: OperatorClient, port: UInt16?, topic: String) throws -> ZMQSocket {
        var telemetryPort = port ?? WireDefaults.telemetryPort
        if port == nil, let named = try? client.call(.whoAmI(.init())).reply.endpoints.telemetryPort, named > 0 {
            telemetryPort = UInt16(truncatingIfNeeded: named)
        }
        do {
            let credential = try coordinator.loadCredential()
            let socket = try ZMQSocket(context: ZMQContext(), type: .sub)
            try socket.makeCurveClient(serverKey: credential.coordinatorKey, keys: credential.keys)
            try socket.subscribe(topic)
            try socket.connect("tcp://\(client.address.host.contains(":") ? "[\(client.address.host)]" : client.address.host):\(telemetryPort)")
            return socket
        } catch let failure as CLIFailure {
            throw failure
        } catch {
            throw CLIFailure("cannot subscribe to the coordinator's telemetry at \(client.address.host):\(telemetryPort): \(error)")
        }
    }
}
