import FleetSystem
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Debian's `chromium`, headless, driven over the Chrome DevTools Protocol on a pipe
/// (`--remote-debugging-pipe`: commands go in on the browser's fd 3, answers and events come
/// out of its fd 4, each one JSON text ended by a NUL byte), so the tests need no WebSocket
/// client and no driver binary. Calls block until answered: a test's own thread.
///
/// `@unchecked Sendable`: its state is guarded by `condition`; the fds are written by one
/// caller at a time (each command is one write of one message).
public final class HeadlessChromium: @unchecked Sendable {
    public static let binary = "/usr/bin/chromium"

    private let pid: pid_t
    private let commands: Int32
    private let answers: Int32
    private let condition = NSCondition()
    private var replies: [Int: [String: Any]] = [:]
    private var ended = false
    private var stopped = false
    private var nextID = 0
    private var received = 0
    public let logPath: String

    /// Starts the browser with a profile in `directory` (and its log there).
    public init(directory: String) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binary) else {
            throw FleetTestError("no \(Self.binary): install Debian's chromium package (scripts/install-deps.sh does)")
        }
        try FileManager.default.createDirectory(atPath: directory + "/chromium-profile", withIntermediateDirectories: true)
        logPath = directory + "/chromium.log"
        var toBrowser: [Int32] = [0, 0], fromBrowser: [Int32] = [0, 0]
        guard pipe(&toBrowser) == 0, pipe(&fromBrowser) == 0 else {
            throw FleetTestError("cannot make the DevTools pipes: \(String(cString: strerror(errno)))")
        }
        // Not inherited by anything else this process starts (pipe2 is not in Swift's Glibc).
        for fd in toBrowser + fromBrowser { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        // The child's fds 3 and 4 must come from fds above them (dup2 onto itself would keep CLOEXEC).
        let browserReads = fcntl(toBrowser[0], F_DUPFD_CLOEXEC, 10), browserWrites = fcntl(fromBrowser[1], F_DUPFD_CLOEXEC, 10)
        close(toBrowser[0])
        close(fromBrowser[1])
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, browserReads, 3)
        posix_spawn_file_actions_adddup2(&actions, browserWrites, 4)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let arguments = [
            Self.binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--remote-debugging-pipe", "--user-data-dir=\(directory)/chromium-profile", "--window-size=1280,900", "about:blank",
        ]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, Self.binary, &actions, nil, &argv, environ)
        close(browserReads)
        close(browserWrites)
        guard spawned == 0 else {
            close(toBrowser[1])
            close(fromBrowser[0])
            throw FleetTestError("cannot start \(Self.binary): \(String(cString: strerror(spawned)))")
        }
        pid = child
        commands = toBrowser[1]
        answers = fromBrowser[0]
        let reader = Thread { [self] in readAnswers() }
        reader.name = "chromium-devtools"
        reader.start()
    }

    deinit { stop() }

    /// Bytes the browser's pages received from the network (HTTP bodies as sent, WebSocket
    /// payloads), counted from the DevTools Network events of pages that `countTraffic`.
    public var receivedBytes: Int {
        condition.lock()
        defer { condition.unlock() }
        return received
    }

    /// CPU time of the browser and every process it started (renderers, GPU, network), ns.
    public func cpuNanoseconds() -> UInt64 {
        var parent: [pid_t: pid_t] = [:]
        var ticks: [pid_t: UInt64] = [:]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let process = pid_t(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            // After the command's closing parenthesis: state, ppid, … utime (14th field), stime (15th).
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 12, let ppid = pid_t(fields[1]), let user = UInt64(fields[11]), let system = UInt64(fields[12]) else { continue }
            parent[process] = ppid
            ticks[process] = user + system
        }
        func descends(_ process: pid_t) -> Bool {
            var current = process
            for _ in 0..<64 {
                if current == pid { return true }
                guard let next = parent[current], next > 1 else { return false }
                current = next
            }
            return false
        }
        let perTick = 1_000_000_000 / UInt64(max(1, sysconf(Int32(_SC_CLK_TCK))))
        return ticks.filter { descends($0.key) }.values.reduce(0, +) * perTick
    }

    /// Ends the browser (SIGTERM, then SIGKILL after 3 s) and waits for it.
    public func stop() {
        condition.lock()
        let first = !stopped
        stopped = true
        condition.unlock()
        guard first else { return }
        kill(pid, SIGTERM)
        var status: Int32 = 0
        var gone = false
        for _ in 0..<30 where !gone {
            gone = waitpid(pid, &status, WNOHANG) == pid
            if !gone { usleep(100_000) }
        }
        if !gone {
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
        }
        close(commands)
    }

    private func readAnswers() {
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let outcome = chunk.withUnsafeMutableBytes { raw in
                Result { () throws(SystemCallError) -> Int in try FileDescriptorIO.readSome(answers, into: raw, target: "chromium's answer pipe") }
            }
            // Chromium closed its end (or the pipe failed): no more answers.
            guard case let .success(count) = outcome, count > 0 else { break }
            pending.append(contentsOf: chunk[0..<count])
            var start = 0
            while let end = pending[start...].firstIndex(of: 0) {
                if let message = try? JSONSerialization.jsonObject(with: Data(pending[start..<end])) as? [String: Any] {
                    condition.lock()
                    if let id = message["id"] as? Int {
                        replies[id] = message
                        condition.broadcast()
                    } else {
                        received += Self.networkBytes(message)
                    }
                    condition.unlock()
                }
                start = end + 1
            }
            pending.removeFirst(start)
        }
        close(answers)
        condition.lock()
        ended = true
        condition.broadcast()
        condition.unlock()
    }

    /// What a Network event says arrived: a response's bytes as sent (`loadingFinished`
    /// counts headers and body, compressed or not) or a WebSocket message's payload.
    static func networkBytes(_ event: [String: Any]) -> Int {
        let parameters = event["params"] as? [String: Any]
        switch event["method"] as? String {
        case "Network.loadingFinished":
            return Int((parameters?["encodedDataLength"] as? Double) ?? 0)
        case "Network.webSocketFrameReceived":
            return ((parameters?["response"] as? [String: Any])?["payloadData"] as? String)?.utf8.count ?? 0
        default:
            return 0
        }
    }

    /// One DevTools command; its result, or its error thrown.
    @discardableResult
    public func command(_ method: String, _ parameters: [String: Any] = [:], session: String? = nil, timeout: Double = 30) throws -> [String: Any] {
        condition.lock()
        nextID += 1
        let id = nextID
        condition.unlock()
        var message: [String: Any] = ["id": id, "method": method, "params": parameters]
        if let session { message["sessionId"] = session }
        var bytes = [UInt8](try JSONSerialization.data(withJSONObject: message))
        bytes.append(0)
        do {
            try FileDescriptorIO.writeAll(commands, bytes, target: "chromium's command pipe")
        } catch {
            throw FleetTestError("chromium is gone (\(method)): \(error); see \(logPath)")
        }
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while replies[id] == nil {
            guard !ended else { throw FleetTestError("chromium ended before answering \(method): see \(logPath)") }
            guard condition.wait(until: deadline) else { throw FleetTestError("chromium did not answer \(method) within \(timeout) s") }
        }
        let reply = replies.removeValue(forKey: id) ?? [:]
        if let error = reply["error"] as? [String: Any] { throw FleetTestError("\(method) failed: \(error)") }
        return reply["result"] as? [String: Any] ?? [:]
    }

    /// A new tab, in a browser context of its own (its own cookies: another person's
    /// browser) unless `sharingCookies`.
    public func newPage(sharingCookies: Bool = false) throws -> Page {
        var target: [String: Any] = ["url": "about:blank"]
        if !sharingCookies, let context = try command("Target.createBrowserContext")["browserContextId"] as? String {
            target["browserContextId"] = context
        }
        guard let targetID = try command("Target.createTarget", target)["targetId"] as? String,
            let session = try command("Target.attachToTarget", ["targetId": targetID, "flatten": true])["sessionId"] as? String
        else { throw FleetTestError("chromium made no page") }
        let page = Page(browser: self, session: session)
        try page.command("Page.enable")
        try page.command("Emulation.setDeviceMetricsOverride", ["width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false])
        return page
    }

    /// One tab: navigation, JavaScript in the page, screenshots.
    public struct Page: @unchecked Sendable {
        public let browser: HeadlessChromium
        public let session: String

        /// Counts what the page receives from now on in the browser's `receivedBytes`.
        public func countTraffic() throws { try command("Network.enable") }

        @discardableResult
        public func command(_ method: String, _ parameters: [String: Any] = [:], timeout: Double = 30) throws -> [String: Any] {
            try browser.command(method, parameters, session: session, timeout: timeout)
        }

        public func navigate(_ url: String) throws {
            let answer = try command("Page.navigate", ["url": url])
            if let failure = answer["errorText"] as? String { throw FleetTestError("cannot open \(url): \(failure)") }
        }

        /// Runs `expression` in the page (a promise is awaited) and returns its value.
        public func evaluate(_ expression: String) throws -> Any? {
            let answer = try command("Runtime.evaluate", ["expression": expression, "awaitPromise": true, "returnByValue": true])
            if let exception = answer["exceptionDetails"] as? [String: Any] {
                let text = ((exception["exception"] as? [String: Any])?["description"] as? String) ?? "\(exception)"
                throw FleetTestError("the page threw: \(text)\nin: \(expression.prefix(200))")
            }
            return (answer["result"] as? [String: Any])?["value"]
        }

        /// Polls `expression` until it is true (JavaScript's truthiness), or throws saying what was waited for.
        public func waitUntil(_ what: String, seconds: Double, _ expression: String) async throws {
            let deadline = Date().addingTimeInterval(seconds)
            var last: Any?
            while Date() < deadline {
                // A page being reloaded has no context to evaluate in for a moment: try again.
                do { last = try evaluate(expression) } catch { last = error }
                if let truth = last as? Bool, truth { return }
                if let number = last as? Double, number != 0 { return }
                try await Task.sleep(for: .milliseconds(250))
            }
            throw FleetTestError("timed out after \(seconds) s waiting until \(what) (last: \(String(describing: last)))")
        }

        /// The page as a PNG file (the whole page, not just the window).
        public func screenshot(to path: String) throws {
            let answer = try command("Page.captureScreenshot", ["format": "png", "captureBeyondViewport": true])
            guard let base64 = answer["data"] as? String, let png = Data(base64Encoded: base64) else { throw FleetTestError("no screenshot data") }
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try png.write(to: URL(fileURLWithPath: path))
        }
    }
}
