import FleetCoordinator
import FleetCore
import FleetHTTP

/// The alert_* settings: where alerts go (a command, a webhook on this machine's network) and
/// how often, checked before the coordinator starts rather than at the first alert.
extension CoordinatorSettings {
    static func alerts(_ settings: SettingsFile, environment env: [String: String]) throws -> AlertConfiguration {
        var alerts = AlertConfiguration()
        if let command = settings.value("alert_command", environment: env), !command.isEmpty { alerts.command = command }
        if let text = settings.value("alert_webhook", environment: env), !text.isEmpty {
            do {
                let url = try LocalWebhookURL(text)
                // Refuse a public address now rather than at the first alert; a name that does
                // not resolve yet (the network may come up later) is checked again at each post.
                if let problem = WebhookClient.localCheck(url), case .notLocal = problem { throw problem }
                alerts.webhook = url
            } catch {
                throw SettingsError("alert_webhook: \(error)")
            }
        }
        alerts.intervalSeconds = try settings.integer("alert_interval_s", environment: env) ?? alerts.intervalSeconds
        guard alerts.intervalSeconds >= 1 else {
            throw SettingsError("alert_interval_s must be at least 1: it is what keeps a flapping node from flooding the pager")
        }
        alerts.burst = try settings.integer("alert_burst", environment: env) ?? alerts.burst
        guard alerts.burst >= 1 else { throw SettingsError("alert_burst must be at least 1") }
        alerts.dropWindowSeconds = try settings.integer("alert_drop_window_s", environment: env) ?? alerts.dropWindowSeconds
        guard alerts.dropWindowSeconds >= 1 else { throw SettingsError("alert_drop_window_s must be at least 1") }
        alerts.commandTimeoutSeconds = try settings.integer("alert_command_timeout_s", environment: env) ?? alerts.commandTimeoutSeconds
        guard alerts.commandTimeoutSeconds >= 1 else { throw SettingsError("alert_command_timeout_s must be at least 1") }
        if let text = settings.value("alert_pressure_level", environment: env) {
            guard let level = PressureLevel(name: text), level > .nominal else {
                throw SettingsError("alert_pressure_level \(text): write fair, serious, critical or shutdown")
            }
            alerts.pressureLevel = level
        }
        if let text = settings.value("alert_drop_share", environment: env) {
            guard let share = Double(text), share > 0, share <= 1 else {
                throw SettingsError("alert_drop_share \(text): write a fraction above 0 and at most 1, e.g. 0.05 for 5 %")
            }
            alerts.dropShare = share
        }
        return alerts
    }
}
