import ArgumentParser
import FleetBus
import FleetClient
import FleetProtocol
import FleetTestSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Many agents on one coordinator: how long the operator's listings take as the fleet grows,
/// and what the coordinator costs while nobody watches.
///
/// `capfleet agent` children with one small synthetic camera each (320x240 YUYV at 1 fps) join
/// a `capfleet coordinator` child in steps; at each step, once every node is online, the
/// `list_devices` and `list_nodes` round trips are timed (median of several, through one
/// operator connection, as `capfleet devices --json` makes them). The figure that matters is
/// the cost per device: a listing that makes one pass over the fleet keeps it flat, one that
/// reads per device makes it grow. At the last step the coordinator's CPU over a quiet
/// interval is read from /proc, per camera.
struct FleetBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet", abstract: "Listing times and coordinator CPU with many agents (one small camera each) on one coordinator.")

    @Option(help: "Fleet sizes to measure at, in agents, ascending (comma-separated).") var steps: String = "25,50,100,200"
    @Option(help: "Listing round trips per measurement (the median is printed).") var repeats: Int = 7
    @Option(help: "Seconds of quiet over which the coordinator's CPU is read at the last step.") var quietSeconds: Double = 10
    @Option(help: "Seconds to let each step settle (registrations, consent pushes, clocks locking) before timing.") var settleSeconds: Double = 5
    @Option(
        help:
            "Seconds before the CPU is read at the last step, for the agents' clock windows to fill and take the coordinator's probe pace (clock.md, \"Pace\"): the steady state a fleet runs in."
    )
    var clockSettleSeconds: Double = 90

    func run() throws {
        let sizes = steps.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }.filter { $0 > 0 }
        guard !sizes.isEmpty, sizes == sizes.sorted() else { throw ValidationError("--steps: ascending fleet sizes, e.g. 25,50,100,200") }
        let fleet = try LocalFleet(
            directory: FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-fleet-bench-\(getpid())").path,
            ports: try FleetPorts.free(record: false, metrics: false), output: .standardError)
        defer { fleet.kill(); fleet.removeDirectory() }
        let credential = try fleet.operatorCredential(for: "bench", role: "admin")
        let coordinator = try fleet.startCoordinator(arguments: ["--log-level", "error"])
        let client = try OperatorClient(address: fleet.operatorAddress, credential: credential, timeout: 60)
        print(
            "== fleet: agents with one 320x240 YUYV camera at 1 fps each, on one coordinator (steps \(sizes.map(String.init).joined(separator: ", ")))"
        )
        print("agents  online after   who_am_i (baseline)   devices listing   per device   nodes listing   per node   devices with formats (--json)")
        var started = 0
        var rows: [(agents: Int, devicesMs: Double, nodesMs: Double, baselineMs: Double, formatsMs: Double)] = []
        for size in sizes {
            let stepStart = Date()
            while started < size {
                try fleet.startAgent(
                    String(format: "fleet-%04d", started),
                    arguments: [
                        "--synthetic", "1", "--synthetic-format", "320x240:YUYV", "--fps", "1", "--no-discover",
                        "--no-pressure", "--log-level", "error",
                    ])
                started += 1
            }
            try fleet.waitUntilBlocking("\(size) nodes online", seconds: 60 + Double(size)) {
                try client.call(.listNodes(.init())).reply.nodes.filter(\.online).count == size
            }
            let online = Date().timeIntervalSince(stepStart)
            // Joining is a burst (HELLO, pushes, the first clock probes); the listing is timed in the steady state after it.
            Thread.sleep(forTimeInterval: settleSeconds)
            // The smallest request there is: what any answer costs on this loaded machine.
            let baselineMs = try median(repeats) { _ = try client.call(.whoAmI(.init())) }
            let devicesMs = try median(repeats) { _ = try client.call(.listDevices(.init())) }
            let nodesMs = try median(repeats) { _ = try client.call(.listNodes(.init())) }
            // What `capfleet devices --json` asks: every device with its whole format list.
            let formatsMs = try median(repeats) { _ = try client.call(.listDevices(.with { $0.withFormats = true })) }
            rows.append((size, devicesMs, nodesMs, baselineMs, formatsMs))
            print(
                String(
                    format: "%6d  %9.1f s   %15.1f ms   %11.1f ms   %7.3f ms   %9.1f ms   %6.3f ms   %18.1f ms",
                    size, online, baselineMs, devicesMs, devicesMs / Double(size), nodesMs, nodesMs / Double(size), formatsMs))
        }
        if let first = rows.first, let last = rows.last, rows.count > 1 {
            let growth = Double(last.agents) / Double(first.agents)
            print(
                String(
                    format:
                        "devices listing: %.1f ms at %d devices (target < 300 ms at 200), %.2fx who_am_i's %.1f ms then; %.1fx the time at %.0fx the devices (linear: %.0fx); per-device cost ratio %.2f (1.00 = linear)",
                    last.devicesMs, last.agents, last.devicesMs / max(last.baselineMs, 0.001), last.baselineMs,
                    last.devicesMs / first.devicesMs, growth, growth,
                    (last.devicesMs / Double(last.agents)) / (first.devicesMs / Double(first.agents))))
        }
        let path = try fleet.credential(for: "bench", role: "admin")
        /// A whole command as a user runs it: a process each (start, key, CURVE handshake,
        /// request, JSON out), median of 3 in ms, with its output.
        func command(_ arguments: [String]) throws -> (ms: Double, output: String) {
            var output = ""
            let ms = try median(3) {
                let result = try fleet.run(
                    arguments + ["--json", "--coordinator", fleet.operatorAddress.description, "--credential", path, "--timeout", "30"])
                guard result.status == 0 else { throw BenchFailure("capfleet \(arguments.joined(separator: " ")) failed: \(result.error)") }
                output = result.output
            }
            return (ms, output)
        }
        if let last = rows.last {
            // On this machine with every agent running beside it.
            let (whoAmI, nodes, devices) = (try command(["whoami"]).ms, try command(["nodes"]).ms, try command(["devices"]).ms)
            print(
                String(
                    format:
                        "whole commands at %d devices with the %d agents on this machine (a process each; median of 3): capfleet whoami --json %.0f ms (the baseline), nodes --json %.0f ms, devices --json %.0f ms; the coordinator's answers to them %.1f and %.1f ms",
                    last.agents, started, whoAmI, nodes, devices, last.nodesMs, last.formatsMs))
        }
        // Each agent probes at its own pace until its clock window is half full (about two
        // minutes after it joined), then at the pace the coordinator's budget gives a fleet this size.
        Thread.sleep(forTimeInterval: clockSettleSeconds)
        let pid = coordinator.processIdentifier
        let agents = fleet.children.map(\.processIdentifier).filter { $0 != pid }
        func agentsCPU() -> UInt64 { agents.reduce(0) { $0 + Self.cpuNanoseconds(pid: $1) } }
        /// What crossed the network (frames the coordinator received) and what the cameras captured, in bytes.
        func bytes() throws -> (received: UInt64, captured: UInt64) {
            let stats = try client.call(.getFleetStats(.init())).reply.deviceStats
            return (stats.reduce(0) { $0 + $1.bytesReceived }, stats.reduce(0) { $0 + $1.bytesCaptured })
        }
        func previews() throws -> UInt64 { try client.call(.getFleetStats(.init())).reply.deviceStats.reduce(0) { $0 + $1.previewsReceived } }
        let previewsBefore = try previews()
        let (before, agentsBefore, bytesBefore) = (Self.cpuNanoseconds(pid: pid), agentsCPU(), try bytes())
        let quietStart = Date()
        Thread.sleep(forTimeInterval: quietSeconds)
        let interval = Date().timeIntervalSince(quietStart) * 1e9
        let share = Double(Self.cpuNanoseconds(pid: pid) - before) / interval * 100
        let agentShare = Double(agentsCPU() - agentsBefore) / interval * 100
        let bytesAfter = try bytes()
        let previewRate = Double(try previews() - previewsBefore) / (interval / 1e9)
        let perCamera = { (total: UInt64) in Double(total) / (interval / 1e9) / Double(max(started, 1)) }
        print(
            String(
                format:
                    "coordinator CPU with nobody watching, %d agents, every camera's preview at 1 fps (%.0f previews/s arrived): %.1f %% of one core (target for 200 previews < 25 %%), %.3f %% per camera (target < 0.2 %%)",
                started, previewRate, share, share / Double(max(started, 1))))
        print(
            String(
                format: "frame bytes received per camera with nobody watching: %.0f B/s (goal 0) while each camera captured %.0f B/s",
                perCamera(bytesAfter.received - bytesBefore.received), perCamera(bytesAfter.captured - bytesBefore.captured)))
        // The same run's baseline: every camera watched, so every frame crosses to the coordinator.
        let context = ZMQContext()
        let viewer = try ZMQSocket(context: context, type: .sub)
        try viewer.makeCurveClient(serverKey: credential.coordinatorKey, keys: credential.keys)
        let devices = try client.call(.listDevices(.init())).reply.devices.map(\.deviceID)
        for device in devices { try viewer.subscribe(LiveTopic.frames(device)) }
        try viewer.connect("tcp://127.0.0.1:\(fleet.ports.livePort)")
        Thread.sleep(forTimeInterval: 3)  // every flow woken
        let (watchedBefore, watchedBytesBefore) = (Self.cpuNanoseconds(pid: pid), try bytes())
        let watchedStart = Date()
        var viewed = 0
        while Date().timeIntervalSince(watchedStart) < quietSeconds {
            while let message = try viewer.receiveMultipart(dontWait: true, maxParts: 3), message.parts.count == 3 { viewed += 1 }
            _ = viewer.waitForInput(milliseconds: 50)
        }
        let watchedInterval = Date().timeIntervalSince(watchedStart) * 1e9
        let watchedShare = Double(Self.cpuNanoseconds(pid: pid) - watchedBefore) / watchedInterval * 100
        let watchedBytes = try bytes()
        viewer.close()
        print(
            String(
                format:
                    "the same fleet with every camera watched (baseline): coordinator %.1f %% of one core, %.0f B/s received per camera, %d frames to the viewer; nobody watching costs %.2fx of it",
                watchedShare, Double(watchedBytes.received - watchedBytesBefore.received) / (watchedInterval / 1e9) / Double(max(started, 1)),
                viewed, share / max(watchedShare, 0.001)))
        // On one machine the agents share its cores with the coordinator: what they take is what the coordinator's answers wait behind.
        print(
            String(
                format: "the %d agent processes meanwhile: %.1f %% of one core, %.2f %% each (load average %@)",
                agents.count, agentShare, agentShare / Double(max(agents.count, 1)), Self.loadAverage()))

        // An operator's machine does not also run the fleet's agents: with them stopped, their
        // devices (and formats) stay listed, offline, and the commands run on a quiet machine.
        let agentChildren = fleet.children.filter { $0.processIdentifier != pid }
        for child in agentChildren { Glibc.kill(child.processIdentifier, SIGTERM) }
        for child in agentChildren { child.stop() }
        Thread.sleep(forTimeInterval: 2)
        let whoAmI = try command(["whoami"]).ms
        let nodes = try command(["nodes"]).ms
        let (devicesMs, listing) = try command(["devices"])
        let listed = (try JSONSerialization.jsonObject(with: Data(listing.utf8)) as? [[String: Any]]) ?? []
        let formats = listed.reduce(0) { $0 + (($1["formats"] as? [Any])?.count ?? 0) }
        print(
            String(
                format:
                    "whole commands with the agents stopped (%d devices, %d formats listed; load average %@): capfleet whoami --json %.0f ms (the baseline), nodes --json %.0f ms, devices --json %.0f ms (target < 300 ms at 200 devices), %.0f ms over the baseline",
                listed.count, formats, Self.loadAverage(), whoAmI, nodes, devicesMs, devicesMs - whoAmI))
    }

    /// The median of `count` timings of `body`, in milliseconds.
    private func median(_ count: Int, _ body: () throws -> Void) throws -> Double {
        var times: [Double] = []
        for _ in 0..<max(count, 1) {
            let start = ContinuousClock.now
            try body()
            let elapsed = ContinuousClock.now - start
            times.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
        }
        return times.sorted()[times.count / 2]
    }

    static func loadAverage() -> String {
        ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").prefix(3).joined(separator: " ")
    }

    /// Nanoseconds on CPU of every thread of the process, from schedstat.
    static func cpuNanoseconds(pid: Int32) -> UInt64 { TelemetryBenchFleet.cpuNanoseconds(pid: pid) }
}
