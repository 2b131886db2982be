import CPlatform
import Foundation

/// Tells systemd how a `Type=notify` service is doing (sd_notify(3)): READY=1 once it serves,
/// STOPPING=1 when it begins to shut down, STATUS= for `systemctl status`. Does nothing when
/// the process was not started by systemd (no $NOTIFY_SOCKET), so callers need not ask.
public enum SystemdNotifier {
    /// Where systemd listens, if it started this process.
    public static var socketPath: String? {
        ProcessInfo.processInfo.environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
    }

    public static func ready(status: String) { send(["READY=1", "STATUS=\(status)", "MAINPID=\(getpid())"]) }

    public static func stopping() { send(["STOPPING=1", "STATUS=stopping"]) }

    public static func status(_ text: String) { send(["STATUS=\(text)"]) }

    /// A failed notification is not worth failing the service for; systemd's start timeout says it.
    private static func send(_ assignments: [String]) {
        guard let path = socketPath else { return }
        let message = assignments.map { $0.replacingOccurrences(of: "\n", with: " ") }.joined(separator: "\n")
        _ = capfleet_notify_socket_send(path, message)
    }
}
