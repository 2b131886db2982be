import FleetBus
import FleetProtocol
import FleetStore
import Foundation

/// Publishes fleet events on `event.<kind>` the moment they happen.
public final class FleetEvents: Sendable {
    private let telemetry: TelemetryPublisherSocket

    init(telemetry: TelemetryPublisherSocket) {
        self.telemetry = telemetry
    }

    func emit(_ kind: Capfleet_V1_EventKind, nodeID: String = "", deviceID: String = "", message: String) {
        let event = Capfleet_V1_FleetEvent.with {
            $0.kind = kind
            $0.unixMs = Date().unixMilliseconds
            $0.nodeID = nodeID
            $0.deviceID = deviceID
            $0.message = message
        }
        guard let payload: [UInt8] = try? event.serializedBytes() else { return }
        telemetry.publish(topic: TelemetryTopic.event(kind), payload: payload)
    }

    /// A node's pressure report on `pressure.<node_id>`.
    func publishPressure(_ report: Capfleet_V1_PressureReport) {
        guard let payload: [UInt8] = try? report.serializedBytes() else { return }
        telemetry.publish(topic: TelemetryTopic.pressure(report.nodeID), payload: payload)
    }
}
