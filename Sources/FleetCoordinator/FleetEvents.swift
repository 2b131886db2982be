import FleetBus
import FleetProtocol
import FleetStore
import Foundation
import Synchronization

/// Publishes fleet events on `event.<kind>` at once and remembers the latest ones.
public final class FleetEvents: Sendable {
    private let telemetry: TelemetryPublisherSocket
    private let recent = Mutex<[Capfleet_V1_FleetEvent]>([])
    private static let remembered = 500

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
        recent.withLock { events in
            events.append(event)
            if events.count > Self.remembered { events.removeFirst(events.count - Self.remembered) }
        }
        guard let payload: [UInt8] = try? event.serializedBytes() else { return }
        telemetry.publish(topic: TelemetryTopic.event(kind), payload: payload)
    }

    var latest: [Capfleet_V1_FleetEvent] { recent.withLock { $0 } }
}
