import ArgumentParser
import CPlatform
import CZeroMQ
import FleetBus
import FleetClient
import FleetCore
import FleetHost
import FleetProtocol
import FleetSystem
import FleetTestSupport
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// How well the fleet agrees on time, against known truth: a coordinator and agents on
/// network namespaces (deploy/netns-fleet.sh), each agent's link through a relay at
/// 1 ms ± 200 µs, each agent's clock deliberately off by a known offset and drift. All
/// namespaces share one kernel clock, so a frame's true capture time in fleet time is its
/// capture time with the skew taken out, plus the coordinator's fleet-time epoch (wall
/// clock minus CLOCK_MONOTONIC, the same for every process on this machine).
///
/// Measures, on the frames the coordinator holds (polled ten times a second per device): the
/// error of their fleet times over `--seconds` after lock, then over `--impaired-seconds`
/// with 5 % loss and 20 ms delay spikes (where the error must stay inside each frame's
/// reported bound); the spread of true capture times across the synthetic cameras in one
/// fleet-time grid slot with frame alignment on, against the unaligned spread measured first
/// (the baseline); and how long a restarted agent takes to lock. Writes the samples as CSV
/// and plots them (PNG, with Debian's python3-matplotlib).
struct ClockBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clock", abstract: "Clock synchronisation accuracy and aligned capture across namespace hosts, against known truth (needs root).")

    @Option(help: "Agent hosts.") var agents: Int = 3
    @Option(help: "Seconds measured after lock on the 1 ms ± 200 µs links.") var seconds: Double = 120
    @Option(help: "Seconds measured with 5 % loss and 20 ms delay spikes added.") var impairedSeconds: Double = 60
    @Option(help: "The synthetic cameras' frame rate.") var fps: Double = 30
    @Option(help: "The coordinator's clock_probe_budget (round trips a second): a small one paces these few agents as a large fleet is paced (clock.md, \"Pace\").")
    var probeBudget: Int?
    @Option(help: "The daemons' cpu_latency_us (clock.md, \"Host tuning\"): 0 keeps this machine's idle CPUs polling, so a probe's timestamps do not wait for a CPU to wake; off measures without it.")
    var cpuLatencyUs: String = "0"
    @Option(help: "Namespace prefix (the fleet is torn down at the end).") var prefix: String = "cfb"
    @Option(help: "The test bed script.") var script: String = "deploy/netns-fleet.sh"
    @Option(help: "Where the CSV and PNG go.") var output: String = ".build/bench"

    static let skews = ["+3.2s,+50ppm", "-1.5s,-50ppm", "+0.7s,-20ppm", "-0.2s,+35ppm"]
    static let cleanLink = "delay=1ms,jitter=200us"
    static let impairedLink = "delay=1ms,jitter=200us,loss=5%,stall=200ms,spike=20ms,spike-every=15s,spike-for=2s"

    func run() throws {
        guard getuid() == 0 else {
            print("== clock accuracy: skipped, network namespaces need root (run as root, as CI does)")
            return
        }
        print("== clock accuracy: \(agents) agent hosts in network namespaces, links \(Self.cleanLink) through `capfleet-relay`, clocks skewed \(Self.skews.prefix(agents).joined(separator: " / ")), synthetic cameras at \(fmt(fps)) fps")
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-clock-bench-\(getpid())").path
        let fleet = NetnsFleetScript(script: script, prefix: prefix, data: data)
        defer { fleet.down() }
        var skewArguments: [String] = []
        for index in 1...agents { skewArguments += ["--skew", "\(index)=\(Self.skews[(index - 1) % Self.skews.count])"] }
        // The capfleet beside this binary; the script finds capfleet-relay beside that.
        // The script hands each daemon its --setting values as CAPFLEET_<KEY> (and no other CAPFLEET_*).
        var settings = ["--setting", "cpu_latency_us=\(cpuLatencyUs)"]
        progress("coordinator and agents with cpu_latency_us = \(cpuLatencyUs)")
        if let probeBudget {
            settings += ["--setting", "clock_probe_budget=\(probeBudget)"]
            progress("coordinator clock_probe_budget \(probeBudget): a locked pace of \(ClockProbePacer(budget: Double(probeBudget)).interval(forAgents: agents) / 1_000_000) ms for \(agents) agents")
        }
        try fleet.run(["up", "--agents", "\(agents)", "--bin", try CapfleetBinary.checked(),
                       "--impair", Self.cleanLink, "--agent-args", "--fps \(fmt(fps)) --synthetic-format 160x120:YUYV --no-pressure"] + skewArguments + settings)
        progress("fleet up; connecting from namespace \(prefix)-coord")
        let client = try NetworkNamespace.operatorClient(namespace: "\(prefix)-coord", address: "10.77.0.1:7602", credentialPath: data + "/admin.credential")
        let credential = try OperatorCredential.load(path: data + "/admin.credential")
        let epoch = try NetworkNamespace.fleetEpoch(namespace: "\(prefix)-coord", endpoint: "tcp://10.77.0.1:7605",
                                                    agentStateDirectory: data + "/a1/state", coordinatorKey: credential.coordinatorKey)
        let localEpoch = Int64(bitPattern: FleetTimeSource().epochOffset)
        progress("fleet-time epoch from the coordinator's clock endpoint; this process's wall minus monotonic differs by \(localEpoch - Int64(bitPattern: epoch)) ns")

        // Each device, and the skew of the node it is on.
        var clocks: [String: NodeClock] = [:]
        var names: [String: String] = [:]
        let nodes = try client.call(.listNodes(.init())).reply.nodes
        for node in nodes {
            guard let index = Int(node.name.dropFirst()), index >= 1 else { continue }
            clocks[node.nodeID] = NodeClock(testSetting: Self.skews[(index - 1) % Self.skews.count])
            names[node.nodeID] = node.name
        }
        let devices = try client.call(.listDevices(.init())).reply.devices.filter { clocks[$0.nodeID] != nil }
        guard devices.count == agents else { throw BenchFailure("expected \(agents) devices, the coordinator lists \(devices.count)") }
        let truth = Truth(epoch: epoch, clocks: Dictionary(uniqueKeysWithValues: devices.map { ($0.deviceID, clocks[$0.nodeID]!) }))

        progress("waiting for \(agents) clocks to lock")
        let locked = try waitForLock(client, nodes: Set(clocks.keys), seconds: 30)
        let lockedAt = Date()
        print("all \(agents) clocks locked \(fmt(locked)) s after the fleet was up (as the coordinator hears it: up to a heartbeat late)")

        let ids = devices.map(\.deviceID)
        var unaligned: [SpreadSample] = []
        for _ in 0..<12 { if let sample = try syncCheck(client, ids, truth) { unaligned.append(sample) } }
        for device in ids { _ = try client.call(.lockDevice(.with { $0.deviceID = device; $0.seconds = 3600 })) }
        _ = try client.call(.changeFrameAlignment(.with { $0.deviceIds = ids; $0.enabled = true }))
        Thread.sleep(forTimeInterval: 3)

        var sampler = FrameSampler(truth: truth)
        let started = Date()
        progress("measuring from \(fmt(started.timeIntervalSince(lockedAt))) s after lock (after the unaligned sync-checks and aligning)")
        var aligned: [SpreadSample] = []
        try sampler.collect(client, ids, phase: "clean", seconds: seconds, since: started) { aligned += try syncCheck(client, ids, truth).map { [$0] } ?? [] }
        try fleet.run(["impair", "all", Self.impairedLink])
        var impairedSpread: [SpreadSample] = []
        try sampler.collect(client, ids, phase: "impaired", seconds: impairedSeconds, since: started) {
            impairedSpread += try syncCheck(client, ids, truth).map { [$0] } ?? []
        }
        try fleet.run(["impair", "all", Self.cleanLink])

        var relocks: [Double] = []
        for index in 1...agents {
            guard let node = names.first(where: { $0.value == "a\(index)" })?.key else { throw BenchFailure("the coordinator lists no node a\(index)") }
            let restartedAt = Date()
            try fleet.run(["restart-agent", "\(index)"])
            relocks.append(try waitForLock(client, nodes: [node], seconds: 20, heardAfter: restartedAt))
        }

        report(sampler: sampler, unaligned: unaligned, aligned: aligned, impairedSpread: impairedSpread, relocks: relocks)
        try plot(sampler: sampler, aligned: aligned)
    }

    // MARK: measuring

    /// Seconds until every node's clock is reported locked (in a report heard after `heardAfter`).
    private func waitForLock(_ client: OperatorClient, nodes: Set<String>, seconds: Double, heardAfter: Date? = nil) throws -> Double {
        let start = heardAfter ?? Date()
        let deadline = start.addingTimeInterval(seconds)
        let after = Int64((heardAfter?.timeIntervalSince1970 ?? 0) * 1000)
        while Date() < deadline {
            let listed = try client.call(.listNodes(.init())).reply.nodes.filter { nodes.contains($0.nodeID) }
            let lockedNow = listed.filter { $0.online && $0.clock.sync == .locked && $0.clock.reportedUnixMs > after }
            if lockedNow.count == nodes.count {
                let heard = lockedNow.map { Double($0.clock.reportedUnixMs) / 1000 }.max() ?? Date().timeIntervalSince1970
                return heard - start.timeIntervalSince1970
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        throw BenchFailure("clocks of \(nodes.sorted().joined(separator: ", ")) not locked within \(fmt(seconds)) s")
    }

    /// One sync-check 300 ms ahead: the spread of the answering frames' reported fleet times
    /// and of their true capture times.
    private func syncCheck(_ client: OperatorClient, _ devices: [String], _ truth: Truth) throws -> SpreadSample? {
        let result = try client.call(.syncCheck(.with { $0.deviceIds = devices; $0.fromNowNs = 300_000_000 })).reply.syncCheck
        let answered = result.entries.filter { $0.status.isOK }
        guard answered.count == devices.count else { return nil }
        let reported = answered.map { Int64(bitPattern: $0.frame.fleetTimeNs) }
        let trueTimes = answered.map { truth.fleetTime(device: $0.deviceID, local: $0.frame.captureLocalNs) }
        return SpreadSample(reported: Double(reported.max()! - reported.min()!), truth: Double(trueTimes.max()! - trueTimes.min()!))
    }

    // MARK: reporting

    private func report(sampler: FrameSampler, unaligned: [SpreadSample], aligned: [SpreadSample], impairedSpread: [SpreadSample], relocks: [Double]) {
        func line(_ label: String, _ samples: [FrameSample]) {
            let errors = samples.map { abs($0.error) }.sorted()
            guard !errors.isEmpty else { return print("\(label): no frames") }
            let outside = samples.filter { abs($0.error) > $0.uncertainty }.count
            let bounds = samples.map(\.uncertainty).sorted()
            print(label.padding(toLength: 34, withPad: " ", startingAt: 0)
                  + String(format: "%6d frames  median %7.1f µs  p99 %7.1f µs  max %8.1f µs   bound median %7.1f µs; outside it: %d",
                           errors.count, quantile(errors, 0.5) / 1e3, quantile(errors, 0.99) / 1e3, errors.last! / 1e3,
                           quantile(bounds, 0.5) / 1e3, outside))
        }
        print("\nfleet-time error of frames (reported fleet time minus true capture time):")
        line("clean links, \(fmt(seconds)) s after lock", sampler.samples.filter { $0.phase == "clean" })
        for device in Set(sampler.samples.map(\.device)).sorted() {
            line("  \(device) (\(sampler.truth.clocks[device].map { skewText($0) } ?? ""))", sampler.samples.filter { $0.phase == "clean" && $0.device == device })
        }
        print("  targets: median ≤ 10 µs, p99 ≤ 50 µs")
        line("5% loss + 20 ms spikes, \(fmt(impairedSeconds)) s", sampler.samples.filter { $0.phase == "impaired" })
        print("  target: no frame outside its reported bound")

        func spreads(_ label: String, _ samples: [SpreadSample]) {
            guard !samples.isEmpty else { return print("\(label): no sync-check answered by every device") }
            let truth = samples.map(\.truth).sorted(), reported = samples.map(\.reported).sorted()
            print(label.padding(toLength: 34, withPad: " ", startingAt: 0)
                  + String(format: "%6d slots   true spread median %8.1f µs  p99 %8.1f µs   (as the agents stamp them: median %.1f µs, p99 %.1f µs)",
                           samples.count, quantile(truth, 0.5) / 1e3, quantile(truth, 0.99) / 1e3, quantile(reported, 0.5) / 1e3, quantile(reported, 0.99) / 1e3))
        }
        print("\ncapture-time spread across the \(agents) cameras in one grid slot (sync-check):")
        spreads("unaligned (baseline)", unaligned)
        spreads("aligned, clean links", aligned)
        spreads("aligned, loss + spikes", impairedSpread)
        if !unaligned.isEmpty, !aligned.isEmpty {
            print(String(format: "  target: aligned p99 ≤ 100 µs; ratio aligned/unaligned median %.4f (frame interval %.1f ms)",
                         quantile(aligned.map(\.truth).sorted(), 0.5) / max(quantile(unaligned.map(\.truth).sorted(), 0.5), 1), 1000 / fps))
        }
        print("\nrestarted agent → locked again: " + relocks.map { String(format: "%.2f s", $0) }.joined(separator: ", ")
              + " (target ≤ 5 s; heard at the coordinator, so up to a heartbeat late)")
    }

    private func skewText(_ clock: NodeClock) -> String {
        String(format: "%+.1f s, %+.0f ppm", Double(clock.offset) / 1e9, clock.driftPPM)
    }

    private func plot(sampler: FrameSampler, aligned: [SpreadSample]) throws {
        try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
        let csv = output + "/clock-accuracy.csv"
        var text = "seconds,phase,device,error_ns,uncertainty_ns\n"
        for sample in sampler.samples {
            text += String(format: "%.3f,%@,%@,%.0f,%.0f\n", sample.seconds, sample.phase, sample.device, sample.error, sample.uncertainty)
        }
        try text.write(toFile: csv, atomically: true, encoding: .utf8)
        let png = output + "/clock-accuracy.png"
        let plotter = URL(fileURLWithPath: script).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("scripts/plot-clock-accuracy.py").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "/usr/bin/env")
        process.arguments = (process.executableURL?.path == "/usr/bin/env" ? ["python3"] : []) + [plotter, csv, png]
        try process.run()
        process.waitUntilExit()
        print(process.terminationStatus == 0 ? "\nsamples: \(csv); plot: \(png)" : "\nsamples: \(csv); plotting failed (needs python3-matplotlib)")
    }
}

/// The truth every sample is judged against.
struct Truth {
    let epoch: UInt64
    let clocks: [String: NodeClock]

    /// The true fleet time of a moment a device's node clock read `local`.
    func fleetTime(device: String, local: UInt64) -> Int64 {
        let clock = clocks[device] ?? .system
        return Int64(bitPattern: clock.monotonic(fromLocal: local) &+ epoch)
    }
}

struct FrameSample {
    var seconds: Double
    var phase: String
    var device: String
    var error: Double
    var uncertainty: Double
}

struct SpreadSample {
    var reported: Double
    var truth: Double
}

/// Polls each device's latest frame at the coordinator and keeps every new one's error.
struct FrameSampler {
    let truth: Truth
    var samples: [FrameSample] = []
    private var lastSequence: [String: UInt64] = [:]

    init(truth: Truth) { self.truth = truth }

    mutating func collect(_ client: OperatorClient, _ devices: [String], phase: String, seconds: Double, since start: Date,
                          everySecond: () throws -> Void) throws {
        let end = Date().addingTimeInterval(seconds)
        var nextSecond = Date()
        while Date() < end {
            for device in devices {
                let header = try client.call(.getLatestFrame(.with { $0.deviceID = device })).reply.frameHeader
                guard header.flags & UInt32(Capfleet_V1_FrameFlag.fleetTimeValid.rawValue) != 0, lastSequence[device] != header.sequence else { continue }
                lastSequence[device] = header.sequence
                let error = Double(Int64(bitPattern: header.fleetTimeNs) - truth.fleetTime(device: device, local: header.captureMonotonicNs))
                samples.append(FrameSample(seconds: Date().timeIntervalSince(start), phase: phase, device: device, error: error,
                                           uncertainty: Double(header.fleetTimeUncertaintyNs)))
            }
            if Date() >= nextSecond {
                nextSecond = nextSecond.addingTimeInterval(1)
                try everySecond()
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
    }
}

/// Operator clients whose sockets live in another network namespace.
enum NetworkNamespace {
    /// Makes the client on a thread that first moves into `namespace`: libzmq starts its
    /// I/O threads from the thread that makes the first socket, and new threads (and the
    /// sockets they open) stay in their creator's namespace.
    static func operatorClient(namespace: String, address: String, credentialPath: String) throws -> OperatorClient {
        let credential = try OperatorCredential.load(path: credentialPath)
        guard let coordinator = CoordinatorAddress(address, defaultPort: 7602) else { throw BenchFailure("bad address \(address)") }
        let made = Mutex<Result<OperatorClient, any Error>?>(nil)
        let thread = OwnedThread(name: "cf-bench-netns") {
            guard capfleet_enter_network_namespace(namespace) == 0 else {
                made.withLock { $0 = .failure(BenchFailure("cannot enter network namespace \(namespace): \(String(cString: strerror(errno)))")) }
                return
            }
            made.withLock { result in result = Result { try OperatorClient(address: coordinator, credential: credential, timeout: 10) } }
        }
        thread.joinBlocking()
        return try made.withLock { $0! }.get()
    }
}

extension NetworkNamespace {
    /// The coordinator's fleet-time epoch (fleet time minus its CLOCK_MONOTONIC) exactly as
    /// it stamps probes: one clock probe from `namespace` with an enrolled agent's key (the
    /// clock endpoint admits node keys only). Reading the wall and monotonic clocks here
    /// instead would differ by however long the coordinator was preempted between its two
    /// reads at start.
    static func fleetEpoch(namespace: String, endpoint: String, agentStateDirectory: String, coordinatorKey: CurvePublicKey) throws -> UInt64 {
        guard let keys = try CurveCertificate.load(path: agentStateDirectory + "/keys/agent.key_secret").keys else {
            throw BenchFailure("no agent key in \(agentStateDirectory)")
        }
        let result = Mutex<Result<UInt64, any Error>?>(nil)
        let thread = OwnedThread(name: "cf-bench-netns") {
            let outcome = Result<UInt64, any Error> {
                guard capfleet_enter_network_namespace(namespace) == 0 else {
                    throw BenchFailure("cannot enter network namespace \(namespace): \(String(cString: strerror(errno)))")
                }
                let socket = try ZMQSocket(context: ZMQContext(), type: .dealer)
                try socket.makeCurveClient(serverKey: coordinatorKey, keys: keys)
                try socket.setOption(ZMQ_LINGER, Int32(0))
                try socket.connect(endpoint)
                let request = Capfleet_V1_ClockProbeRequest.with {
                    $0.protocolVersion = WireDefaults.protocolMajor
                    $0.sequence = 1
                }
                try socket.send(try request.serializedBytes() as [UInt8])
                guard socket.waitForInput(milliseconds: 5_000), let received = try? socket.receiveMultipart(dontWait: true, maxParts: 2),
                      let part = received.parts.first, let reply = try? Capfleet_V1_ClockProbeReply(serializedBytes: part.array),
                      reply.status.isOK else { throw BenchFailure("no clock probe answer from \(endpoint)") }
                return reply.timebase
            }
            result.withLock { $0 = outcome }
        }
        thread.joinBlocking()
        return try result.withLock { $0! }.get()
    }
}

private func quantile(_ sorted: [Double], _ p: Double) -> Double {
    sorted[min(sorted.count - 1, max(0, Int((Double(sorted.count) * p).rounded(.up)) - 1))]
}
