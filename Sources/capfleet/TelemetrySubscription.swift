import FleetBus
import FleetClient
import FleetProtocol
import Foundation

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

extension TelemetrySubscription {
    /// Follows `topic` on `subscriber`: hands each message's payload to `show`, which prints
    /// what it holds (at most the items still wanted) and says how many, until `limit` items
    /// (nil: for ever), or until `patience` seconds pass without a message (nil: never), which
    /// fails with what `silent` says.
    static func follow(
        _ subscriber: ZMQSocket, topic: String, limit: Int?, patience: Double?, silent: (Double) -> CLIFailure,
        show: (_ payload: [UInt8], _ wanted: Int?) throws -> Int
    ) throws {
        var shown = 0
        var lastHeard = Date()
        while limit.map({ shown < $0 }) ?? true {
            if let patience, Date().timeIntervalSince(lastHeard) > patience { throw silent(patience) }
            guard subscriber.waitForInput(milliseconds: 250),
                let message = try? subscriber.receiveMultipart(dontWait: true), message.parts.count == 2,
                String(decoding: message.parts[0].array, as: UTF8.self) == topic
            else { continue }
            lastHeard = Date()
            shown += try show(message.parts[1].array, limit.map { $0 - shown })
            fflush(nil)
        }
    }
}
