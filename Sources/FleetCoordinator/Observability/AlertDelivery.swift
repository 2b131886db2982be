import FleetCore
import FleetHTTP
import FleetHost
import FleetSystem
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One alert as handed to an operator's command or webhook.
struct AlertNotice: Sendable, Codable, Equatable {
    var alert: String
    var nodeID: String
    var deviceID: String
    var message: String
    var unixMs: Int64
    var suppressed: UInt32
    var coordinatorID: String

    enum CodingKeys: String, CodingKey {
        case alert, message, suppressed
        case nodeID = "node_id", deviceID = "device_id", unixMs = "unix_ms", coordinatorID = "coordinator_id"
    }

    var json: [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? encoder.encode(self)) ?? Data())
    }

    var environment: [String: String] {
        [
            "CAPFLEET_ALERT": alert, "CAPFLEET_ALERT_NODE": nodeID, "CAPFLEET_ALERT_DEVICE": deviceID,
            "CAPFLEET_ALERT_MESSAGE": message, "CAPFLEET_ALERT_UNIX_MS": "\(unixMs)",
            "CAPFLEET_ALERT_SUPPRESSED": "\(suppressed)", "CAPFLEET_COORDINATOR_ID": coordinatorID,
        ]
    }
}

/// Hands alerts to the configured command and webhook on a thread of its own: running a
/// program and waiting on a socket are blocking, and a slow pager gateway must never hold
/// up the coordinator. The queue is bounded; when it is full the oldest alert is dropped
/// (and counted as failed) so the newest news gets through.
final class AlertDelivery: Sendable {
    private let command: String?
    private let webhook: LocalWebhookURL?
    private let commandTimeoutMilliseconds: Int64
    private let logger: Logger
    private let onOutcome: @Sendable (_ alert: String, _ delivered: Bool) -> Void
    private let worker: OwnedWorker<AlertNotice>
    static let capacity = 64

    init(
        command: String?, webhook: LocalWebhookURL?, commandTimeoutSeconds: UInt32, logger: Logger,
        onOutcome: @escaping @Sendable (_ alert: String, _ delivered: Bool) -> Void
    ) {
        self.command = command
        self.webhook = webhook
        let timeout = Int64(commandTimeoutSeconds) * 1000
        commandTimeoutMilliseconds = timeout
        self.logger = logger
        self.onOutcome = onOutcome
        worker = OwnedWorker(
            name: "cf-alerts", capacity: Self.capacity, whenFull: .dropOldest,
            onDrop: { dropped in
                logger.warning(
                    "alert queue full: dropped the oldest alert", metadata: ["alert": "\(dropped.alert)", "message": "\(dropped.message)"])
                onOutcome(dropped.alert, false)
            },
            handle: { notice in
                Self.deliver(notice, command: command, webhook: webhook, timeoutMilliseconds: timeout, logger: logger, onOutcome: onOutcome)
            })
    }

    var hasTargets: Bool { command != nil || webhook != nil }

    func enqueue(_ notice: AlertNotice) { worker.offer(notice) }

    /// Delivers what is queued, then stops the thread.
    func stop() { worker.stopBlocking() }

    private static func deliver(
        _ notice: AlertNotice, command: String?, webhook: LocalWebhookURL?, timeoutMilliseconds: Int64,
        logger: Logger, onOutcome: @Sendable (_ alert: String, _ delivered: Bool) -> Void
    ) {
        var delivered = true
        if let command {
            do {
                // `/bin/sh -c COMMAND` with the alert on stdin and in its environment.
                try ShellCommand.run(
                    command, environment: notice.environment, input: notice.json + [10],
                    timeoutMilliseconds: timeoutMilliseconds)
            } catch {
                delivered = false
                logger.warning("alert command failed", metadata: ["alert": "\(notice.alert)", "error": "\(error)"])
            }
        }
        if let webhook {
            do {
                _ = try WebhookClient.post(notice.json, to: webhook)
            } catch {
                delivered = false
                logger.warning("alert webhook failed", metadata: ["alert": "\(notice.alert)", "error": "\(error)"])
            }
        }
        onOutcome(notice.alert, delivered)
    }
}
