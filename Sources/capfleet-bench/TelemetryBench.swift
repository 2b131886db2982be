import ArgumentParser
import FleetBus
import FleetClient
import FleetCore
import FleetProtocol
import FleetTestSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What pressure telemetry costs an agent, and how fast a level change reaches a subscriber.
///
/// Cost: one `capfleet agent` child streaming a 1920x1080 YUYV synthetic camera at 30 fps into
/// a `capfleet coordinator` child, measured with pressure sampling off (`--no-pressure`, the
/// baseline) and on (the default once a second, and a stressed 100 ms), from /proc: the whole
/// agent's CPU time and resident memory, and the sampler thread's own CPU time (the precise
/// figure; the whole-agent difference drowns in the capture's noise).
///
/// Delay: an agent reading a fixture tree whose CPU PSI flips between 0 and 50 % every
/// 300 ms; a ZeroMQ subscriber on the coordinator's telemetry port timestamps each
/// `event.pressure_level_changed` against the sample time the agent put in its report.
struct TelemetryBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "telemetry",
        abstract: "Agent CPU and memory with pressure telemetry on versus off at 1080p30, and level-change delay to a subscriber.")

    @Option(help: "Seconds measured per configuration.") var seconds: Double = 10
    @Option(help: "Level changes to time.") var changes: Int = 40

    func run() throws {
        print("== telemetry cost: agent streaming 1920x1080 YUYV at 30 fps, \(fmt(seconds)) s per configuration")
        let fleet = try TelemetryBenchFleet()
        defer { fleet.stop() }
        var rows: [(String, AgentCost)] = []
        for (label, extra) in [
            ("pressure off (baseline)", ["--no-pressure"]), ("pressure on, every 1 s", []),
            ("pressure on, every 100 ms", ["--pressure-interval-ms", "100"]),
        ] {
            rows.append((label, try fleet.measureAgent(extra: extra, seconds: seconds)))
        }
        let baseline = rows[0].1
        print("configuration                 agent CPU   vs baseline   sampler thread   RSS MiB   fps")
        for (label, cost) in rows {
            let delta = cost.cpuPercent - baseline.cpuPercent
            print(
                label.padding(toLength: 28, withPad: " ", startingAt: 0)
                    + String(
                        format: "  %6.2f %%    %+6.2f %%      %7.3f %%      %6.1f   %5.1f",
                        cost.cpuPercent, delta, cost.samplerCPUPercent, cost.residentMegabytes, cost.framesPerSecond))
        }
        let sampler = rows[1].1.samplerCPUPercent
        print(
            String(
                format:
                    "pressure telemetry at the default interval: %.3f %% of one core on its own thread (target < 1 %%); ratio agent CPU on/off %.3f",
                sampler, baseline.cpuPercent > 0 ? rows[1].1.cpuPercent / baseline.cpuPercent : 0))

        print("\n== level change → subscriber delay (\(changes) changes, sampling every 50 ms)")
        let delays = try fleet.measureLevelChangeDelay(changes: changes)
        guard !delays.isEmpty else { throw BenchFailure("no level change reached the subscriber") }
        let sorted = delays.sorted()
        func percentile(_ p: Double) -> Double { sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)] }
        print(
            String(
                format:
                    "received %d of %d changes: p50 %.2f ms  p99 %.2f ms  max %.2f ms (sample taken on the agent → event.pressure_level_changed at the subscriber)",
                delays.count, changes, percentile(0.5), percentile(0.99), sorted.last!))
    }
}

struct AgentCost {
    var cpuPercent: Double
    var samplerCPUPercent: Double
    var residentMegabytes: Double
    var framesPerSecond: Double
}

/// A coordinator child process on free ports, and agents started against it.
final class TelemetryBenchFleet {
    let fleet: LocalFleet
    let credential: OperatorCredential
    var ports: FleetPorts { fleet.ports }

    init() throws {
        fleet = try LocalFleet(
            directory: FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-telemetry-bench-\(getpid())").path,
            ports: try FleetPorts.free(record: false, metrics: false), output: .standardError)
        credential = try fleet.operatorCredential(for: "bench", role: "admin")
        try fleet.startCoordinator(arguments: ["--log-level", "error"])
    }

    func stop() { fleet.remove() }

    /// A 1080p30 synthetic camera; an agent name's first start enrolls it.
    private func startAgent(name: String, extra: [String]) throws -> FleetChild {
        try fleet.startAgent(
            name,
            arguments: [
                "--synthetic", "1", "--no-discover", "--synthetic-format", "1920x1080:YUYV", "--fps", "30",
                "--log-level", "error",
            ] + extra)
    }

    func measureAgent(extra: [String], seconds: Double) throws -> AgentCost {
        let agent = try startAgent(name: "cost", extra: extra)
        defer { agent.stop() }
        let pid = agent.processIdentifier
        Thread.sleep(forTimeInterval: 3)  // register, start streaming, settle
        let startWall = MonotonicTime.now()
        let startCPU = Self.cpuNanoseconds(pid: pid)
        let startSampler = Self.cpuNanoseconds(pid: pid, namePrefix: "cf-pressure")
        let startFrames = try framesCaptured()
        Thread.sleep(forTimeInterval: seconds)
        let elapsed = Double(MonotonicTime.now() - startWall) / 1e9
        let cpu = Double(Self.cpuNanoseconds(pid: pid) &- startCPU) / 1e9 / elapsed * 100
        let endSampler = Self.cpuNanoseconds(pid: pid, namePrefix: "cf-pressure")
        let sampler = Double(endSampler &- startSampler) / 1e9 / elapsed * 100
        let frames = Double(try framesCaptured() - startFrames) / elapsed
        return AgentCost(
            cpuPercent: cpu, samplerCPUPercent: sampler, residentMegabytes: TransportBench.residentMegabytes(pid: pid),
            framesPerSecond: frames)
    }

    private func framesCaptured() throws -> UInt64 {
        let client = try OperatorClient(address: fleet.operatorAddress, credential: credential)
        return try client.call(.getFleetStats(.init())).reply.deviceStats.filter(\.online).reduce(0) { $0 + $1.framesCaptured }
    }

    func measureLevelChangeDelay(changes: Int) throws -> [Double] {
        let root = fleet.directory + "/host"
        try FileManager.default.createDirectory(atPath: root + "/proc/pressure", withIntermediateDirectories: true)
        // Renamed into place, so the agent never reads half a file; a write that fails would
        // leave the level unchanged and the figure wrong, so it stops the benchmark.
        func cpu(_ percent: Double) throws {
            let path = root + "/proc/pressure/cpu"
            try "some avg10=\(percent) avg60=0.00 avg300=0.00 total=1\n".write(toFile: path + ".tmp", atomically: false, encoding: .utf8)
            guard rename(path + ".tmp", path) == 0 else {
                throw BenchFailure("cannot rename \(path).tmp into place: \(String(cString: strerror(errno)))")
            }
        }
        try cpu(0)
        let context = ZMQContext()
        let subscriber = try ZMQSocket(context: context, type: .sub)
        defer { subscriber.close() }
        try subscriber.makeCurveClient(serverKey: credential.coordinatorKey, keys: credential.keys)
        try subscriber.subscribe(TelemetryTopic.event(.pressureLevelChanged))
        try subscriber.subscribe(TelemetryTopic.pressurePrefix)
        try subscriber.connect("tcp://127.0.0.1:\(ports.telemetryPort)")
        let agent = try startAgent(name: "delay", extra: ["--pressure-root", root, "--pressure-interval-ms", "50"])
        defer { agent.stop() }
        Thread.sleep(forTimeInterval: 3)

        // A level change publishes its report (with previous_level and the sample time) and
        // then the event; the delay runs from the sample to the event's arrival.
        var delays: [Double] = []
        var pendingSampleMs: Int64?
        var high = false
        var nextFlip = MonotonicTime.now()
        var flips = 0
        let deadline = MonotonicTime.now() + UInt64(changes) * 600_000_000 + 5_000_000_000
        while delays.count < changes && MonotonicTime.now() < deadline {
            if MonotonicTime.now() >= nextFlip && flips < changes + 2 {
                high.toggle()
                try cpu(high ? 50 : 0)
                flips += 1
                nextFlip = MonotonicTime.now() + 300_000_000
            }
            guard subscriber.waitForInput(milliseconds: 20),
                let (parts, _) = try subscriber.receiveMultipart(dontWait: true, maxParts: 2), parts.count == 2
            else { continue }
            let received = Date().timeIntervalSince1970 * 1000
            let topic = String(decoding: parts[0].array, as: UTF8.self)
            if topic.hasPrefix(TelemetryTopic.pressurePrefix) {
                if let report = try? Capfleet_V1_PressureReport(serializedBytes: parts[1].array), report.previousLevel != .unspecified,
                    report.previousLevel != report.level
                {
                    pendingSampleMs = report.unixMs
                }
            } else if let sample = pendingSampleMs {
                delays.append(received - Double(sample))
                pendingSampleMs = nil
            }
        }
        return delays
    }

    /// Nanoseconds on CPU of the process's threads (all, or those whose name starts with
    /// `namePrefix`), from schedstat: exact, where stat's clock ticks are 10 ms coarse.
    static func cpuNanoseconds(pid: Int32, namePrefix: String? = nil) -> UInt64 {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.reduce(0) { total, tid in
            if let namePrefix {
                let name = (try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/comm", encoding: .utf8)) ?? ""
                guard name.hasPrefix(namePrefix) else { return total }
            }
            let schedstat = (try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/schedstat", encoding: .utf8)) ?? ""
            return total + (schedstat.split(separator: " ").first.flatMap { UInt64($0) } ?? 0)
        }
    }
}
