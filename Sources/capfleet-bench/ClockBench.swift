import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import FleetTestSupport
import Foundation

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
        commandName: "clock", abstract: "Clock synchronisation accuracy and aligned capture across namespace hosts, against known truth (needs root)."
    )

    @Option(help: "Agent hosts.") var agents: Int = 3
    @Option(help: "Seconds measured after lock on the 1 ms ± 200 µs links.") var seconds: Double = 120
    @Option(help: "Seconds measured with 5 % loss and 20 ms delay spikes added.") var impairedSeconds: Double = 60
    @Option(help: "The synthetic cameras' frame rate.") var fps: Double = 30
    @Option(
        help:
            "The coordinator's clock_probe_budget (round trips a second): a small one paces these few agents as a large fleet is paced (clock.md, \"Pace\")."
    )
    var probeBudget: Int?
    @Option(
        help:
            "The daemons' cpu_latency_us (clock.md, \"Host tuning\"): 0 keeps this machine's idle CPUs polling, so a probe's timestamps do not wait for a CPU to wake; off measures without it."
    )
    var cpuLatencyUs: String = "0"
    @Option(help: "Namespace prefix (the fleet is torn down at the end).") var prefix: String = "cfb"
    @Option(help: "The test bed script.") var script: String = "deploy/netns-fleet.sh"
    @Option(help: "Where the CSV and PNG go.") var output: String = ".build/bench"

    static let impairedLink = "delay=1ms,jitter=200us,loss=5%,stall=200ms,spike=20ms,spike-every=15s,spike-for=2s"

    func run() throws {
        guard NetnsBenchFleet.mayRun("clock accuracy") else { return }
        print(
            "== clock accuracy: \(agents) agent hosts in network namespaces, links \(NetnsBenchFleet.cleanLink) through `capfleet-relay`, clocks skewed \(NetnsBenchFleet.skews.prefix(agents).joined(separator: " / ")), synthetic cameras at \(fmt(fps)) fps"
        )
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-clock-bench-\(getpid())").path
        let fleet = NetnsFleetScript(script: script, prefix: prefix, data: data)
        defer { fleet.down() }
        var settings = ["cpu_latency_us=\(cpuLatencyUs)"]
        progress("coordinator and agents with cpu_latency_us = \(cpuLatencyUs)")
        if let probeBudget {
            settings.append("clock_probe_budget=\(probeBudget)")
            progress(
                "coordinator clock_probe_budget \(probeBudget): a locked pace of \(ClockProbePacer(budget: Double(probeBudget)).interval(forAgents: agents) / 1_000_000) ms for \(agents) agents"
            )
        }
        let hosts = try NetnsBenchFleet.up(
            fleet, agents: agents, agentArguments: "--fps \(fmt(fps)) --synthetic-format 160x120:YUYV --no-pressure",
            settings: settings)
        let client = hosts.client, truth = hosts.truth, names = hosts.nodeNames, devices = hosts.devices

        progress("waiting for \(agents) clocks to lock")
        let locked = try hosts.waitForLock(seconds: 30)
        let lockedAt = Date()
        print("all \(agents) clocks locked \(fmt(locked)) s after the fleet was up (as the coordinator hears it: up to a heartbeat late)")

        let ids = devices.map(\.deviceID)
        var unaligned: [SpreadSample] = []
        for _ in 0..<12 { if let sample = try syncCheck(client, ids, truth) { unaligned.append(sample) } }
        try hosts.align(ids)
        Thread.sleep(forTimeInterval: 3)

        var sampler = FrameSampler(truth: truth)
        let started = Date()
        progress("measuring from \(fmt(started.timeIntervalSince(lockedAt))) s after lock (after the unaligned sync-checks and aligning)")
        var aligned: [SpreadSample] = []
        try sampler.collect(client, ids, phase: "clean", seconds: seconds, since: started) {
            aligned += try syncCheck(client, ids, truth).map { [$0] } ?? []
        }
        try fleet.run(["impair", "all", Self.impairedLink])
        var impairedSpread: [SpreadSample] = []
        try sampler.collect(client, ids, phase: "impaired", seconds: impairedSeconds, since: started) {
            impairedSpread += try syncCheck(client, ids, truth).map { [$0] } ?? []
        }
        try fleet.run(["impair", "all", NetnsBenchFleet.cleanLink])

        var relocks: [Double] = []
        for index in 1...agents {
            guard let node = names.first(where: { $0.value == "a\(index)" })?.key else {
                throw BenchFailure("the coordinator lists no node a\(index)")
            }
            let restartedAt = Date()
            try fleet.run(["restart-agent", "\(index)"])
            relocks.append(try hosts.waitForLock(nodes: [node], seconds: 20, heardAfter: restartedAt))
        }

        report(sampler: sampler, unaligned: unaligned, aligned: aligned, impairedSpread: impairedSpread, relocks: relocks)
        try plot(sampler: sampler, aligned: aligned)
    }

    // MARK: measuring

    /// One sync-check 300 ms ahead: the spread of the answering frames' reported fleet times
    /// and of their true capture times.
    private func syncCheck(_ client: OperatorClient, _ devices: [String], _ truth: Truth) throws -> SpreadSample? {
        let result = try client.call(
            .syncCheck(
                .with {
                    $0.deviceIds = devices; $0.fromNowNs = 300_000_000
                })
        ).reply.syncCheck
        let answered = result.entries.filter { $0.status.isOK }
        guard answered.count == devices.count else { return nil }
        let reported = answered.map { Int64(bitPattern: $0.frame.fleetTimeNs) }
        let trueTimes = answered.map { truth.fleetTime(device: $0.deviceID, local: $0.frame.captureLocalNs) }
        return SpreadSample(reported: Double(reported.max()! - reported.min()!), truth: Double(trueTimes.max()! - trueTimes.min()!))
    }

    // MARK: reporting

    private func report(sampler: FrameSampler, unaligned: [SpreadSample], aligned: [SpreadSample], impairedSpread: [SpreadSample], relocks: [Double])
    {
        func line(_ label: String, _ samples: [FrameSample]) {
            let errors = samples.map { abs($0.error) }.sorted()
            guard !errors.isEmpty else { return print("\(label): no frames") }
            let outside = samples.filter { abs($0.error) > $0.uncertainty }.count
            let bounds = samples.map(\.uncertainty).sorted()
            print(
                label.padding(toLength: 34, withPad: " ", startingAt: 0)
                    + String(
                        format: "%6d frames  median %7.1f µs  p99 %7.1f µs  max %8.1f µs   bound median %7.1f µs; outside it: %d",
                        errors.count, quantile(errors, 0.5) / 1e3, quantile(errors, 0.99) / 1e3, errors.last! / 1e3,
                        quantile(bounds, 0.5) / 1e3, outside))
        }
        print("\nfleet-time error of frames (reported fleet time minus true capture time):")
        line("clean links, \(fmt(seconds)) s after lock", sampler.samples.filter { $0.phase == "clean" })
        for device in Set(sampler.samples.map(\.device)).sorted() {
            line(
                "  \(device) (\(sampler.truth.clocks[device].map { skewText($0) } ?? ""))",
                sampler.samples.filter { $0.phase == "clean" && $0.device == device })
        }
        print("  targets: median ≤ 10 µs, p99 ≤ 50 µs")
        line("5% loss + 20 ms spikes, \(fmt(impairedSeconds)) s", sampler.samples.filter { $0.phase == "impaired" })
        print("  target: no frame outside its reported bound")

        func spreads(_ label: String, _ samples: [SpreadSample]) {
            guard !samples.isEmpty else { return print("\(label): no sync-check answered by every device") }
            let truth = samples.map(\.truth).sorted(), reported = samples.map(\.reported).sorted()
            print(
                label.padding(toLength: 34, withPad: " ", startingAt: 0)
                    + String(
                        format: "%6d slots   true spread median %8.1f µs  p99 %8.1f µs   (as the agents stamp them: median %.1f µs, p99 %.1f µs)",
                        samples.count, quantile(truth, 0.5) / 1e3, quantile(truth, 0.99) / 1e3, quantile(reported, 0.5) / 1e3,
                        quantile(reported, 0.99) / 1e3))
        }
        print("\ncapture-time spread across the \(agents) cameras in one grid slot (sync-check):")
        spreads("unaligned (baseline)", unaligned)
        spreads("aligned, clean links", aligned)
        spreads("aligned, loss + spikes", impairedSpread)
        if !unaligned.isEmpty, !aligned.isEmpty {
            print(
                String(
                    format: "  target: aligned p99 ≤ 100 µs; ratio aligned/unaligned median %.4f (frame interval %.1f ms)",
                    quantile(aligned.map(\.truth).sorted(), 0.5) / max(quantile(unaligned.map(\.truth).sorted(), 0.5), 1), 1000 / fps))
        }
        print(
            "\nrestarted agent → locked again: " + relocks.map { String(format: "%.2f s", $0) }.joined(separator: ", ")
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
        let plotter = URL(fileURLWithPath: script).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
            "scripts/plot-clock-accuracy.py"
        ).path
        let process = Process()
        process.executableURL = URL(
            fileURLWithPath: FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "/usr/bin/env")
        process.arguments = (process.executableURL?.path == "/usr/bin/env" ? ["python3"] : []) + [plotter, csv, png]
        try process.run()
        process.waitUntilExit()
        print(process.terminationStatus == 0 ? "\nsamples: \(csv); plot: \(png)" : "\nsamples: \(csv); plotting failed (needs python3-matplotlib)")
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

    mutating func collect(
        _ client: OperatorClient, _ devices: [String], phase: String, seconds: Double, since start: Date,
        everySecond: () throws -> Void
    ) throws {
        let end = Date().addingTimeInterval(seconds)
        var nextSecond = Date()
        while Date() < end {
            for device in devices {
                let header = try client.call(.getLatestFrame(.with { $0.deviceID = device })).reply.frameHeader
                guard header.flags & UInt32(Capfleet_V1_FrameFlag.fleetTimeValid.rawValue) != 0, lastSequence[device] != header.sequence else {
                    continue
                }
                lastSequence[device] = header.sequence
                let error = Double(Int64(bitPattern: header.fleetTimeNs) - truth.fleetTime(device: device, local: header.captureMonotonicNs))
                samples.append(
                    FrameSample(
                        seconds: Date().timeIntervalSince(start), phase: phase, device: device, error: error,
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
