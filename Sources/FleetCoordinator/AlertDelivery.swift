#if canImport(Glibc)
import Glibc
#endif
import FleetCore
import FleetHTTP
import Foundation
import Logging
import Synchronization

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
        ["CAPFLEET_ALERT": alert, "CAPFLEET_ALERT_NODE": nodeID, "CAPFLEET_ALERT_DEVICE": deviceID,
         "CAPFLEET_ALERT_MESSAGE": message, "CAPFLEET_ALERT_UNIX_MS": "\(unixMs)",
         "CAPFLEET_ALERT_SUPPRESSED": "\(suppressed)", "CAPFLEET_COORDINATOR_ID": coordinatorID]
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
    private let queue = Mutex<[AlertNotice]>([])
    private let available = DispatchSemaphore(value: 0)
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    static let capacity = 64

    init(command: String?, webhook: LocalWebhookURL?, commandTimeoutSeconds: UInt32, logger: Logger,
         onOutcome: @escaping @Sendable (_ alert: String, _ delivered: Bool) -> Void) {
        self.command = command
        self.webhook = webhook
        commandTimeoutMilliseconds = Int64(commandTimeoutSeconds) * 1000
        self.logger = logger
        self.onOutcome = onOutcome
        let thread = Thread { [self] in
            ThreadName.set("cf-alerts")
            run()
        }
        thread.name = "cf-alerts"
        thread.start()
    }

    var hasTargets: Bool { command != nil || webhook != nil }

    func enqueue(_ notice: AlertNotice) {
        let dropped: AlertNotice? = queue.withLock { pending in
            pending.append(notice)
            return pending.count > Self.capacity ? pending.removeFirst() : nil
        }
        if let dropped {
            logger.warning("alert queue full: dropped the oldest alert", metadata: ["alert": "\(dropped.alert)", "message": "\(dropped.message)"])
            onOutcome(dropped.alert, false)
        } else {
            available.signal()
        }
    }

    /// Delivers what is queued, then stops the thread.
    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        available.signal()
        finished.wait()
    }

    private func run() {
        defer { finished.signal() }
        while true {
            available.wait()
            while let notice = queue.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { deliver(notice) }
            if stopped.load(ordering: .acquiring) { return }
        }
    }

    private func deliver(_ notice: AlertNotice) {
        var delivered = true
        if let command {
            do {
                try runCommand(command, notice: notice)
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

    enum CommandFailure: Error, CustomStringConvertible {
        case cannotStart(Int32)
        case exited(Int32)
        case killedAfterTimeout(Int64)
        case signalled(Int32)

        var description: String {
            switch self {
            case let .cannotStart(code): "cannot start /bin/sh: \(String(cString: strerror(code)))"
            case let .exited(status): "exited with status \(status)"
            case let .killedAfterTimeout(ms): "still running after \(ms) ms: killed"
            case let .signalled(signal): "ended by signal \(signal)"
            }
        }
    }

    /// `/bin/sh -c COMMAND` with the alert on stdin and in its environment. Spawned with an
    /// empty signal mask and default handlers, whatever this process blocks.
    private func runCommand(_ command: String, notice: AlertNotice) throws(CommandFailure) {
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { throw .cannotStart(errno) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[0], 0)
        posix_spawn_file_actions_addclose(&actions, pipeFDs[1])
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigfillset(&defaults)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        var environment = ProcessInfo.processInfo.environment
        for (key, value) in notice.environment { environment[key] = value }
        let arguments = ["/bin/sh", "-c", command]
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/sh", &actions, &attributes, argv, envp)
        close(pipeFDs[0])
        guard spawned == 0 else {
            close(pipeFDs[1])
            throw .cannotStart(spawned)
        }
        // The JSON is small (under a pipe's buffer), so this write does not wait for the reader.
        let body = notice.json + [10]
        _ = body.withUnsafeBytes { write(pipeFDs[1], $0.baseAddress, $0.count) }
        close(pipeFDs[1])

        let deadline = Int64(MonotonicTime.now() / 1_000_000) + commandTimeoutMilliseconds
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) == 0 {
            if Int64(MonotonicTime.now() / 1_000_000) >= deadline {
                kill(-pid, SIGKILL)
                waitpid(pid, &status, 0)
                throw .killedAfterTimeout(commandTimeoutMilliseconds)
            }
            usleep(20_000)
        }
        let signal = status & 0x7F
        if signal != 0 { throw .signalled(signal) }
        let code = (status >> 8) & 0xFF
        if code != 0 { throw .exited(code) }
    }
}
