import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import FleetTestSupport
import Foundation

/// What the web dashboard costs the coordinator: N synthetic cameras (small, 5 fps, consent
/// granted, so their previews are real pictures once a second), measured with nobody
/// watching (the baseline) and with one headless Chromium showing the whole grid (a window
/// tall enough for every tile, so every tile's preview is wanted): the coordinator's CPU, the
/// ratio against the baseline, the bytes a second the browser receives (HTTP and WebSocket),
/// the previews the page's pace let it show, and whether the page stays smooth: its main
/// thread's busy share, frames a second while it draws every frame, the slowest 1 % of frames
/// and its long tasks.
struct DashboardBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dashboard", abstract: "Coordinator CPU and bytes to the browser with one browser watching a grid of N previews.")

    @Option(help: "Camera counts to measure, comma-separated.") var steps: String = "20,100,200"
    @Option(help: "Seconds measured per configuration.") var seconds: Double = 15
    @Option(help: "Cameras per agent.") var camerasPerAgent: Int = 10

    func run() throws {
        guard FileManager.default.isExecutableFile(atPath: HeadlessChromium.binary) else {
            throw BenchFailure("no \(HeadlessChromium.binary): install Debian's chromium (scripts/install-deps.sh does)")
        }
        let counts = steps.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }.sorted()
        let fleet = try LocalFleet(
            directory: FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-dashboard-bench-\(getpid())").path,
            ports: try FleetPorts.free(record: false, metrics: true), output: .standardError)
        defer { fleet.remove() }
        let credential = try fleet.operatorCredential(for: "bench", role: "admin")
        let coordinator = try fleet.startCoordinator(arguments: ["--log-level", "error"])
        let client = try OperatorClient(address: fleet.operatorAddress, credential: credential)
        print("== dashboard: one headless Chromium watching a grid of N camera previews (1 a second each), \(fmt(seconds)) s per figure")
        print("While measured the page draws every frame, as when it is scrolled; previews shown is what the page's pace allowed")
        print("(each visible preview once a second at most), frames and long tasks (50 ms or more) are the page's own.")
        print(
            "cameras   coordinator CPU idle   with the browser   ratio   to the browser   previews shown   browser CPU   page main thread   frames   p99 frame   long tasks"
        )
        var agents = 0
        for count in counts {
            // More agents until the fleet has `count` cameras.
            while agents * camerasPerAgent < count {
                agents += 1
                try fleet.startAgent(
                    "dash-\(agents)",
                    arguments: [
                        "--synthetic", "\(camerasPerAgent)", "--no-discover", "--synthetic-format", "320x240:YUYV",
                        "--fps", "5", "--log-level", "error",
                    ])
            }
            let devices = try waitForDevices(client, count: agents * camerasPerAgent)
            for device in devices where device.consent != .authorized {
                _ = try client.call(
                    .changeConsent(
                        .with {
                            $0.deviceID = device.deviceID
                            $0.action = .grant
                            $0.reason = "benchmark: a test pattern"
                        }))
            }
            Thread.sleep(forTimeInterval: 3)  // previews real
            let pid = coordinator.processIdentifier
            let idle = measureCPU(pid: pid)

            let browser = try HeadlessChromium(directory: fleet.directory + "/browser-\(count)")
            defer { browser.stop() }
            let page = try browser.newPage()
            // Tall enough for every tile (about five to a 1280-pixel row, 250 pixels each).
            try page.command(
                "Emulation.setDeviceMetricsOverride",
                ["width": 1280, "height": max(900, (devices.count / 5 + 2) * 260), "deviceScaleFactor": 1, "mobile": false])
            let link = try client.call(.createDashboardSignIn(.init())).reply.dashboardSignIn
            try page.navigate("http://127.0.0.1:\(link.httpPort)\(link.path)")
            let settle = Date().addingTimeInterval(30)
            while Date() < settle {
                let shown = try page.evaluate("[...document.querySelectorAll('.tile img')].filter((i) => i.naturalWidth > 0).length") as? Double ?? 0
                if Int(shown) >= devices.count { break }
                Thread.sleep(forTimeInterval: 0.5)
            }
            try page.countTraffic()
            try page.command("Performance.enable")
            Thread.sleep(forTimeInterval: 2)
            try watch(page, of: browser, coordinator: pid, idle: idle, label: "\(devices.count)")
            // The largest grid as a person sees it: a 1920x1080 window, scrolled through the
            // whole grid and back while measured (tiles load their previews as they come into view).
            if count == counts.last {
                try page.command("Emulation.setDeviceMetricsOverride", ["width": 1920, "height": 1080, "deviceScaleFactor": 1, "mobile": false])
                Thread.sleep(forTimeInterval: 2)
                try watch(page, of: browser, coordinator: pid, idle: idle, label: "\(devices.count) in 1920x1080, scrolled", scrolled: true)
            }
            fflush(nil)
        }
    }

    /// One row: the coordinator's CPU and what the page did while `seconds` passed.
    private func watch(
        _ page: HeadlessChromium.Page, of browser: HeadlessChromium, coordinator pid: Int32, idle: (percent: Double, elapsed: Double),
        label: String, scrolled: Bool = false
    ) throws {
        _ = try page.evaluate(Self.frameRecorder(scrolling: scrolled))
        let shownBefore = try page.evaluate("pace.shown") as? Double ?? 0
        let bytesBefore = browser.receivedBytes
        let browserCPU = browser.cpuNanoseconds()
        let busyBefore = try mainThreadBusySeconds(page)
        let watched = measureCPU(pid: pid)
        let bytesPerSecond = Double(browser.receivedBytes - bytesBefore) / watched.elapsed
        let browserShare = Double(browser.cpuNanoseconds() &- browserCPU) / 1e9 / watched.elapsed * 100
        // How much of the page's main thread the updates take: what is left is for scrolling and input.
        let mainThread = (try mainThreadBusySeconds(page) - busyBefore) / watched.elapsed * 100
        let shown = ((try page.evaluate("pace.shown") as? Double ?? 0) - shownBefore) / watched.elapsed
        let frames = try Self.frames(page)
        let ratio = idle.percent > 0 ? watched.percent / idle.percent : 0
        print(
            String(repeating: " ", count: max(0, 7 - label.count)) + label
                + String(
                    format: "   %17.2f %%   %14.2f %%   %5.2f   %9.1f kB/s   %10.1f /s   %8.1f %%   %13.1f %%   %4.1f/s   %6.1f ms   %10d",
                    idle.percent, watched.percent, ratio, bytesPerSecond / 1000, shown, browserShare, mainThread,
                    frames.perSecond, frames.p99Milliseconds, frames.longTasks))
        fflush(nil)
    }

    private func measureCPU(pid: Int32) -> (percent: Double, elapsed: Double) {
        let start = MonotonicTime.now()
        let cpu = TelemetryBenchFleet.cpuNanoseconds(pid: pid)
        Thread.sleep(forTimeInterval: seconds)
        let elapsed = Double(MonotonicTime.now() - start) / 1e9
        return (Double(TelemetryBenchFleet.cpuNanoseconds(pid: pid) &- cpu) / 1e9 / elapsed * 100, elapsed)
    }

    /// Records the page's frames (an animation-frame loop, so the page draws every frame as
    /// while scrolled) and its long tasks, until `frames(_:)` reads them; a recorder started
    /// again stops the one before.
    /// `scrolling`: each frame also scrolls 40 pixels, down the grid and back up.
    static func frameRecorder(scrolling: Bool) -> String {
        """
        (() => {
        if (window.benchFrames) window.benchFrames.stopped = true;
        const recording = { gaps: [], longTasks: 0, last: performance.now(), step: \(scrolling ? 40 : 0), stopped: false };
        window.benchFrames = recording;
        if (!window.benchLongTasks) {
          window.benchLongTasks = new PerformanceObserver((list) => { window.benchFrames.longTasks += list.getEntries().length; });
          window.benchLongTasks.observe({ type: "longtask" });
        }
        (function frame(now) {
          if (recording.stopped) return;
          recording.gaps.push(now - recording.last); recording.last = now;
          if (recording.step) {
            const end = document.documentElement.scrollHeight - innerHeight;
            if ((recording.step > 0 && scrollY >= end - 1) || (recording.step < 0 && scrollY <= 0)) recording.step = -recording.step;
            scrollBy(0, recording.step);
          }
          requestAnimationFrame(frame);
        })(performance.now());
        })();
        true
        """
    }

    /// Frames a second, the 99th percentile time between frames and the long tasks since `frameRecorder`.
    static func frames(_ page: HeadlessChromium.Page) throws -> (perSecond: Double, p99Milliseconds: Double, longTasks: Int) {
        let text = try page.evaluate("JSON.stringify(window.benchFrames)") as? String ?? "{}"
        let recorded = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
        let gaps = ((recorded["gaps"] as? [Double]) ?? []).dropFirst(2).sorted()
        guard !gaps.isEmpty else { return (0, 0, recorded["longTasks"] as? Int ?? 0) }
        let perSecond = Double(gaps.count) / (gaps.reduce(0, +) / 1000)
        return (perSecond, gaps[min(gaps.count - 1, Int(Double(gaps.count) * 0.99))], recorded["longTasks"] as? Int ?? 0)
    }

    /// Seconds the page's main thread has spent on tasks (DevTools' Performance.getMetrics).
    private func mainThreadBusySeconds(_ page: HeadlessChromium.Page) throws -> Double {
        let metrics = try page.command("Performance.getMetrics")["metrics"] as? [[String: Any]] ?? []
        return metrics.first { $0["name"] as? String == "TaskDuration" }?["value"] as? Double ?? 0
    }

    private func waitForDevices(_ client: OperatorClient, count: Int) throws -> [Capfleet_V1_DeviceInfo] {
        for _ in 0..<600 {
            let devices = try client.call(.listDevices(.init())).reply.devices.filter(\.online)
            if devices.count >= count { return devices }
            Thread.sleep(forTimeInterval: 0.1)
        }
        throw BenchFailure("\(count) cameras did not register within 60 s")
    }
}
