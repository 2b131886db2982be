import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import FleetTestSupport
import Foundation

/// Triggered GenICam cameras on the fleet's grid (proto-docs/clock.md, "Triggered cameras";
/// issue "industrial GenICam cameras"): three namespace hosts, each with Aravis's fake GigE
/// Vision camera on a link of its own, first free-running, then triggered by their agents at
/// every slot. Prints each agent's trigger lateness (median, p99, max: how long after its
/// slot's instant each trigger left) and the exposure spread across the three cameras of the
/// first frame each captured after an instant (`SyncCheck`, sampled once a second), free-running
/// against triggered in the same run: by the cameras' own timestamps (the fake cameras stamp
/// frames with this machine's real-time clock, which every namespace shares, so these compare
/// directly: the truth here) and by the fleet times the agents gave the frames (each camera's
/// clock mapped from its frames' arrivals, or from the triggers once triggered). Then what the
/// cameras saw: each fake camera draws the timecode of its exposure into its frames
/// (`--genicam-timecode`), and an exposure audit after each phase prints the stamps' offset
/// from it per camera and the exposure spread it reads.
///
/// Aravis's fake cameras free-run on ticks of the host's real-time clock (a multiple of their
/// frame interval), so on one machine three of them already expose together: their
/// free-running spread here is their scheduling jitter, not the up to half an interval real
/// free-running cameras show. The triggered figures are the ones this measures.
///
/// `--actions`: the cameras are PTP-locked and take scheduled action commands (clock.md,
/// "Scheduled action commands"; the test bed's `--genicam-ptp`), so "triggered" is each agent
/// sending a command ahead of every slot, and the lateness is how long after its planned
/// departure each command left.
struct GenICamTriggerBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "genicam-trigger",
        abstract: "Trigger lateness and exposure spread of fake GigE Vision cameras on three hosts, triggered on the grid (needs root).")

    @Option(help: "Seconds each phase (free-running, triggered) is sampled over.") var seconds: Double = 20
    @Option(help: "The cameras' frame rate (the grid's).") var fps: Double = 25
    @Option(help: "Seconds each exposure audit reads the cameras' timecodes for (1 to 60).") var auditSeconds: Int = 3
    @Option(help: "Namespace prefix (the fleet is torn down at the end).") var prefix: String = "cfgt"
    @Option(help: "The test bed script.") var script: String = "deploy/netns-fleet.sh"
    @Flag(help: "PTP-locked cameras sent scheduled action commands in place of software triggers.") var actions = false

    func run() throws {
        guard NetnsBenchFleet.mayRun("genicam-trigger") else { return }
        print(
            "== GenICam \(actions ? "scheduled action commands" : "triggers"): three hosts' fake GigE Vision cameras\(actions ? " (PTP-locked)" : "") at \(fmt(fps)) fps, \(fmt(seconds)) s free-running, then \(fmt(seconds)) s triggered"
        )
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-genicam-trigger-bench-\(getpid())").path
        let fleet = NetnsFleetScript(script: script, prefix: prefix, data: data)
        defer { fleet.down() }
        // Idle CPUs kept polling, as the sync benchmark does (clock.md, "Host tuning"): a
        // trigger thread waking from a deep idle state is late by the wake-up.
        let hosts = try NetnsBenchFleet.up(
            fleet, agents: 3, agentArguments: "--synthetic 0 --no-pressure", settings: ["cpu_latency_us=0"],
            upArguments: ["--genicam-timecode"] + (actions ? ["--genicam-ptp"] : []))
        let cameras = hosts.devices.filter { $0.kind == .genicam }.map(\.deviceID).sorted()
        guard cameras.count == 3 else { throw BenchFailure("expected three GenICam cameras, the coordinator lists \(cameras)") }
        let client = hosts.client
        _ = try hosts.waitForLock(seconds: 60)
        try hosts.grantConsent(cameras)
        for camera in cameras {
            _ = try client.call(
                .lockDevice(
                    .with {
                        $0.deviceID = camera; $0.seconds = 3600
                    }))
            _ = try client.call(
                .changeFrameRate(
                    .with {
                        $0.deviceID = camera; $0.framesPerSecond = fps
                    }))
        }
        Thread.sleep(forTimeInterval: 2)

        let free = try Self.spreads(client, cameras, seconds: seconds)
        let freeAudit = try Self.audit(client, cameras, seconds: auditSeconds)
        try hosts.align(cameras)
        // Triggers start at the next slot once each agent has the grid; the window starts after a settling second.
        Thread.sleep(forTimeInterval: 2)
        let triggered = try Self.spreads(client, cameras, seconds: seconds)
        let triggeredAudit = try Self.audit(client, cameras, seconds: auditSeconds)
        let statuses = try client.call(.getFleetStats(.init())).reply.deviceStats.filter { cameras.contains($0.deviceID) }

        print(
            actions
                ? "\naction command lateness per camera (how long after its planned departure, 10 ms before its slot, each command left the agent, last minute):"
                : "\ntrigger lateness per camera (how long after its slot's instant each trigger left the agent, last minute):")
        print("camera                       fired   missed   median      p99         max")
        for status in statuses.sorted(by: { $0.deviceID < $1.deviceID }) {
            let alignment = status.alignment
            print(
                Self.pad(status.deviceID, 29) + Self.pad("\(alignment.triggersFired)", 8) + Self.pad("\(alignment.triggersMissed)", 9)
                    + Self.pad(Self.micro(alignment.triggerLatenessMedianNs), 12) + Self.pad(Self.micro(alignment.triggerLatenessP99Ns), 12)
                    + Self.micro(alignment.triggerLatenessMaxNs))
        }
        print("\nexposure spread across the three cameras, each one's first frame after an instant, once a second:")
        print("                                  samples   median      p99         max")
        for (name, figures) in [
            ("free-running, cameras' clocks", free.cameras), ("triggered, cameras' clocks", triggered.cameras),
            ("free-running, fleet times", free.fleet), ("triggered, fleet times", triggered.fleet),
        ] {
            print(
                Self.pad(name, 34) + Self.pad("\(figures.frames)", 10) + Self.pad(Self.micro(figures.median), 12)
                    + Self.pad(Self.micro(figures.p99), 12)
                    + Self.micro(figures.maximum))
        }
        print("\nwhat the cameras saw: exposure audits over \(auditSeconds) s (the timecode each fake camera draws of its exposure)")
        print("                                  read      offset median per camera (stamp − what it saw)         spread median  p99")
        for (name, result) in [("free-running", freeAudit), ("triggered", triggeredAudit)] {
            let read = result.cameras.map(\.framesRead).reduce(0, +)
            let offsets = result.cameras.map { Self.signedMicro($0.stampOffset.medianNs) }.joined(separator: ", ")
            print(
                Self.pad(name, 34) + Self.pad("\(read)", 10) + Self.pad(offsets, 56)
                    + Self.pad(Self.micro(UInt64(max(0, result.exposureSpread.medianNs))), 15)
                    + Self.micro(UInt64(max(0, result.exposureSpread.p99Ns))))
        }
        progress(
            "triggered/free-running median spread by what the cameras saw: \(String(format: "%.2f", Double(triggeredAudit.exposureSpread.medianNs) / Double(max(freeAudit.exposureSpread.medianNs, 1))))"
        )
        progress(
            "triggered/free-running median spread by the cameras' clocks: \(String(format: "%.2f", Double(triggered.cameras.median) / Double(max(free.cameras.median, 1)))) (the fake cameras free-run on ticks of the host's real-time clock: see the command's help)"
        )
    }

    /// `SyncCheck` once a second for `seconds`: the spread of the cameras' first frames at or
    /// after an instant, by their own timestamps and by their fleet times.
    static func spreads(_ client: OperatorClient, _ cameras: [String], seconds: Double) throws -> (cameras: PhaseStatistics, fleet: PhaseStatistics) {
        var spreads: [UInt64] = []
        var own: [UInt64] = []
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            let result = try client.call(
                .syncCheck(
                    .with {
                        $0.deviceIds = cameras
                        $0.fromNowNs = 200_000_000
                    })
            ).reply.syncCheck
            if result.entries.count == cameras.count, result.entries.allSatisfy(\.hasFrame) {
                spreads.append(result.spreadNs)
                let stamps = result.entries.map(\.frame.deviceTimestampNs)
                if let low = stamps.min(), let high = stamps.max(), low > 0 { own.append(high - low) }
            }
            Thread.sleep(forTimeInterval: 0.8)
        }
        return (PhaseStatistics(magnitudes: own), PhaseStatistics(magnitudes: spreads))
    }

    /// An exposure audit of the cameras over `seconds`.
    static func audit(_ client: OperatorClient, _ cameras: [String], seconds: Int) throws -> Capfleet_V1_SyncAuditResult {
        let result = try client.call(
            .syncAudit(
                .with {
                    $0.deviceIds = cameras
                    $0.seconds = UInt32(seconds)
                })
        ).reply.syncAudit
        for camera in result.cameras where !camera.status.isOK { print("  \(camera.deviceID): \(camera.status.reason)") }
        return result
    }

    static func signedMicro(_ nanoseconds: Int64) -> String { String(format: "%+.1f µs", Double(nanoseconds) / 1e3) }

    static func pad(_ text: String, _ width: Int) -> String { text.padding(toLength: max(width, text.count + 1), withPad: " ", startingAt: 0) }

    static func micro(_ nanoseconds: UInt64) -> String { String(format: "%.1f µs", Double(nanoseconds) / 1e3) }
}
