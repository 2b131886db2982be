import FleetBus
import FleetProtocol
import Logging

/// Where agents' sensor readings go (sensors.md): on telemetry under
/// `data.<node_id>.<stream>`, as the agent sent them, and into the sensor track of the
/// cameras' files of each take recording the stream. Nothing is stored in the index per
/// batch: a publish and a look at the takes per batch (at most 20 a second per stream) is all
/// a stream costs the coordinator.
final class SensorDataRelay: Sendable {
    private let telemetry: TelemetryPublisherSocket
    private let takes: TakeDirector
    private let logger: Logger

    init(telemetry: TelemetryPublisherSocket, takes: TakeDirector, logger: Logger) {
        self.telemetry = telemetry
        self.takes = takes
        self.logger = logger
    }

    /// Follows the fleet's node events until the feed ends, relaying each batch.
    func follow(_ nodeEvents: AsyncStream<NodeEvent>) async {
        for await event in nodeEvents {
            guard case let .sensorData(batch) = event else { continue }
            received(batch)
            await takes.sensed(batch)
        }
    }

    /// A batch the control handler accepted (from the node that has the stream).
    func received(_ batch: Capfleet_V1_SensorData) {
        do {
            telemetry.publish(topic: TelemetryTopic.data(nodeID: batch.nodeID, stream: batch.stream), payload: try batch.serializedBytes())
        } catch {
            logger.error("sensor readings could not be encoded", metadata: ["device.id": "\(batch.deviceID)", "error": "\(error)"])
        }
    }
}
