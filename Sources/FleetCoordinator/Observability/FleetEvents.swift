import FleetBus
import FleetCore
import FleetProtocol
import FleetStore
import Foundation
import Synchronization

/// Publishes fleet events on `event.<kind>` the moment they happen.
public final class FleetEvents: Sendable {
    private let telemetry: TelemetryPublisherSocket
    /// The last events, for `capfleet events` and the dashboard (a telemetry subscriber sees
    /// only what comes after it joins), each with its number in the coordinator's run.
    private let recentEvents = Mutex<Recent>(Recent())
    static let remembered = 1000

    private let metrics: FleetMetrics?
    /// Each event's time (`unix_ms`).
    private let wallClock: WallClock

    init(telemetry: TelemetryPublisherSocket, metrics: FleetMetrics? = nil, wallClock: WallClock = .system) {
        self.telemetry = telemetry
        self.metrics = metrics
        self.wallClock = wallClock
    }

    @discardableResult
    func emit(
        _ kind: Capfleet_V1_EventKind, nodeID: String = "", deviceID: String = "", message: String,
        alert: Capfleet_V1_AlertKind = .unspecified, suppressed: UInt32 = 0
    ) -> Capfleet_V1_FleetEvent {
        let event = Capfleet_V1_FleetEvent.with {
            $0.kind = kind
            $0.unixMs = wallClock.unixMilliseconds()
            $0.nodeID = nodeID
            $0.deviceID = deviceID
            $0.message = message
            $0.alert = alert
            $0.suppressed = suppressed
        }
        recentEvents.withLock { recent in
            if recent.events.count >= Self.remembered { recent.events.removeFirst(recent.events.count - Self.remembered + 1) }
            recent.last += 1
            recent.events.append((recent.last, event))
        }
        metrics?.countEvent(kind)
        if let payload: [UInt8] = try? event.serializedBytes() {
            telemetry.publish(topic: TelemetryTopic.event(kind), payload: payload)
        }
        return event
    }

    /// The last `limit` events, oldest first.
    func recent(limit: Int) -> [Capfleet_V1_FleetEvent] {
        recentEvents.withLock { $0.events.suffix(limit).map(\.event) }
    }

    /// The events after number `cursor` (at most the last `limit`), oldest first, and the
    /// number to ask after next time.
    func recent(after cursor: UInt64, limit: Int) -> (events: [Capfleet_V1_FleetEvent], cursor: UInt64) {
        recentEvents.withLock { recent in
            (recent.events.suffix(limit).filter { $0.number > cursor }.map(\.event), recent.last)
        }
    }

    struct Recent {
        var last: UInt64 = 0
        var events: [(number: UInt64, event: Capfleet_V1_FleetEvent)] = []
    }

    /// A node's pressure report on `pressure.<node_id>`.
    func publishPressure(_ report: Capfleet_V1_PressureReport) {
        guard let payload: [UInt8] = try? report.serializedBytes() else { return }
        telemetry.publish(topic: TelemetryTopic.pressure(report.nodeID), payload: payload)
    }
}
