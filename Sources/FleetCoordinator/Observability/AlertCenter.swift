import FleetCore
import FleetProtocol
import Foundation
import Logging
import Synchronization

/// Turns what happens in the fleet into alerts: a node offline, a device interrupted, a
/// pressure level at or above the alert level, drops above the alert share. Each alert is
/// rate limited per rule and subject (and overall), then published as `event.alert` and
/// handed to the operator's command or webhook, if configured.
final class AlertCenter: Sendable {
    private let configuration: AlertConfiguration
    private let events: FleetEvents
    private let metrics: FleetMetrics
    private let delivery: AlertDelivery
    private let coordinatorID: String
    private let throttle: Mutex<AlertThrottle>
    private let dropAlarms = Mutex<[String: DropAlarm]>([:])

    init(configuration: AlertConfiguration, events: FleetEvents, metrics: FleetMetrics, coordinatorID: String, logger: Logger) {
        self.configuration = configuration
        self.events = events
        self.metrics = metrics
        self.coordinatorID = coordinatorID
        throttle = Mutex(
            AlertThrottle(
                intervalNanoseconds: UInt64(configuration.intervalSeconds) * 1_000_000_000,
                burst: configuration.burst))
        delivery = AlertDelivery(
            command: configuration.command, webhook: configuration.webhook,
            commandTimeoutSeconds: configuration.commandTimeoutSeconds, logger: logger
        ) { alert, delivered in
            metrics.countAlert(alert, outcome: delivered ? "delivered" : "failed")
        }
    }

    func stop() { delivery.stop() }

    func nodeOffline(_ nodeID: String, message: String) {
        raise(.nodeOffline, nodeID: nodeID, message: message)
    }

    func deviceInterrupted(_ deviceID: String, nodeID: String, message: String) {
        raise(.deviceInterrupted, nodeID: nodeID, deviceID: deviceID, message: message)
    }

    /// A level change: alerts when the level rises to the alert level or above (each rise
    /// counts, so critical after serious alerts again).
    func pressureChanged(nodeID: String, from previous: PressureLevel?, to level: PressureLevel, detail: String) {
        guard level >= configuration.pressureLevel, previous.map({ level > $0 }) ?? true else { return }
        raise(.pressure, nodeID: nodeID, message: "pressure \(detail)", subject: "\(nodeID) \(level)")
    }

    /// Once a second per device, with its cumulative counters.
    func deviceCounters(_ deviceID: String, nodeID: String, frames: UInt64, drops: UInt64, at now: UInt64) {
        let result = dropAlarms.withLock { alarms in
            var alarm =
                alarms[deviceID]
                ?? DropAlarm(
                    threshold: configuration.dropShare,
                    windowNanoseconds: UInt64(configuration.dropWindowSeconds) * 1_000_000_000)
            let result = alarm.observe(frames: frames, drops: drops, at: now)
            alarms[deviceID] = alarm
            return result
        }
        guard result.fire else { return }
        let percent = (result.share * 1000).rounded() / 10
        raise(
            .drops, nodeID: nodeID, deviceID: deviceID,
            message:
                "lost \(percent) % of its frames over the last \(configuration.dropWindowSeconds) s (alert at \((configuration.dropShare * 1000).rounded() / 10) %)"
        )
    }

    private func raise(_ kind: Capfleet_V1_AlertKind, nodeID: String, deviceID: String = "", message: String, subject: String? = nil) {
        let name = kind.name
        let key = "\(name) \(subject ?? (deviceID.isEmpty ? nodeID : deviceID))"
        let decision = throttle.withLock { $0.consider(key: key, at: MonotonicTime.now()) }
        guard decision.deliver else {
            metrics.countAlert(name, outcome: "throttled")
            return
        }
        let suppressed = UInt32(clamping: decision.suppressedBefore)
        let text = message + (suppressed > 0 ? " (\(suppressed) similar alert(s) held back)" : "")
        let event = events.emit(.alert, nodeID: nodeID, deviceID: deviceID, message: text, alert: kind, suppressed: suppressed)
        metrics.countAlert(name, outcome: "published")
        if delivery.hasTargets {
            delivery.enqueue(
                AlertNotice(
                    alert: name, nodeID: nodeID, deviceID: deviceID, message: text, unixMs: event.unixMs,
                    suppressed: suppressed, coordinatorID: coordinatorID))
        }
    }
}
