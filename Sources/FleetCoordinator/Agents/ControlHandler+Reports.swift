import FleetBus
import FleetCore
import FleetProtocol
import FleetStore
import Foundation
import Logging

/// What nodes report between commands (device events, pressure and clock changes):
/// published at once and audited.
extension ControlHandler {

    /// Interruptions, policy actions and zoom changes: published at once and audited.
    func record(_ event: Capfleet_V1_DeviceEvent, from nodeID: String) async {
        let (kind, action, detail): (Capfleet_V1_EventKind, String, String) =
            switch event.kind {
            case .interrupted:
                (
                    .deviceInterrupted, "device.interrupted",
                    "\(InterruptionReason(wire: event.interruption.reason)?.rawValue ?? "unknown"): \(event.interruption.message)"
                )
            case .resumed: (.deviceResumed, "device.resumed", event.message)
            case .policyActed: (.policyActed, "policy.acted", event.message)
            case .zoomChanged: (.zoomChanged, "device.zoom", event.message)
            case .encoder: (.encoder, "device.encoder", event.message)
            default: (.unspecified, "device.event", event.message)
            }
        logger.notice(
            "device event", metadata: ["node.id": "\(nodeID)", "device.id": "\(event.deviceID)", "event": "\(action)", "detail": "\(detail)"])
        events.emit(kind, nodeID: nodeID, deviceID: event.deviceID, message: detail)
        if kind != .unspecified {
            // The take's timed metadata names the event as its telemetry topic does.
            nodeEvents.publish(
                .device(
                    deviceID: event.deviceID,
                    kind: kind == .deviceInterrupted ? "interrupted" : kind == .deviceResumed ? "resumed" : kind.topicSuffix, detail: detail))
        }
        if kind == .deviceInterrupted { alerts.deviceInterrupted(event.deviceID, nodeID: nodeID, message: "interrupted: \(detail)") }
        do {
            try await store.appendAudit(
                AuditEntry(
                    at: clock.unixMilliseconds(), actor: "agent:\(nodeID)", action: action,
                    target: event.deviceID, outcome: "ok", detail: detail))
        } catch {
            logger.error("cannot audit a device event", metadata: ["device.id": "\(event.deviceID)", "error": "\(error)"])
        }
    }

    /// A node's pressure level changed: published at once (its topic and an event) and audited.
    func recordPressureChange(_ report: Capfleet_V1_PressureReport) async {
        let from = PressureLevel(wire: report.previousLevel)?.description ?? "unknown"
        let to = PressureLevel(wire: report.level)?.description ?? "unknown"
        let factors = report.factors.map { "\($0.factor) \(PressureLevel(wire: $0.level)?.description ?? "?")" }.joined(separator: ", ")
        var detail = "\(from) → \(to)" + (factors.isEmpty ? "" : " (\(factors))")
        let drops = DropTally(wire: report.intervalDrops)
        if drops.total > 0 {
            let reasons = [("late", drops.late), ("out_of_buffers", drops.outOfBuffers), ("discontinuity", drops.discontinuity)]
                .filter { $0.1 > 0 }.map { (name: String, count: UInt64) -> String in "\(count) \(name)" }.joined(separator: ", ")
            detail += "; lost \(drops.total) of \(drops.total.addingSaturated(report.intervalFrames)) frames in the last interval: \(reasons)"
        }
        logger.notice("pressure level changed", metadata: ["node.id": "\(report.nodeID)", "pressure": "\(detail)"])
        events.publishPressure(report)
        events.emit(.pressureLevelChanged, nodeID: report.nodeID, message: detail)
        if let level = PressureLevel(wire: report.level) {
            alerts.pressureChanged(nodeID: report.nodeID, from: PressureLevel(wire: report.previousLevel), to: level, detail: detail)
        }
        do {
            try await store.appendAudit(
                AuditEntry(
                    at: clock.unixMilliseconds(), actor: "agent:\(report.nodeID)", action: "pressure.level",
                    target: report.nodeID, outcome: "ok", detail: detail))
        } catch {
            logger.error("cannot audit a pressure change", metadata: ["node.id": "\(report.nodeID)", "error": "\(error)"])
        }
    }

    /// A node's clock locked, lost lock or started over: published at once and audited.
    func recordClockChange(_ change: ClockSyncWatch.Change) async {
        logger.notice(
            "clock state changed",
            metadata: [
                "node.id": "\(change.nodeID)", "clock.state": "\(change.to.name ?? "unknown")",
                "detail": "\(change.message)",
            ])
        events.emit(.clockStateChanged, nodeID: change.nodeID, message: change.message)
        do {
            try await store.appendAudit(
                AuditEntry(
                    at: clock.unixMilliseconds(), actor: "agent:\(change.nodeID)", action: "clock.state",
                    target: change.nodeID, outcome: "ok",
                    detail: "\(change.from.name ?? "unknown") → \(change.to.name ?? "unknown"): \(change.message)"))
        } catch {
            logger.error("cannot audit a clock state change", metadata: ["node.id": "\(change.nodeID)", "error": "\(error)"])
        }
    }
}
