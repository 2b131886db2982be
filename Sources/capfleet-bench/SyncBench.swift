import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import FleetTestSupport
import Foundation

/// Whether the cameras' exposures agree, by what they saw: three agent hosts in network
/// namespaces, links through the delay relay, clocks skewed, each with a synthetic camera
/// whose sensor model free-runs on its own oscillator and films the shared timecode scene (a
/// QR code of the true time of each exposure). `sync_audit` decodes it from every camera's
/// frames; its exposure spread is the ground truth the steering is judged by.
///
/// Measures: the spread of free-running cameras; how long the phase loop takes to bring each
/// camera into phase; the spread of steered sensor models; the same after one agent is killed
/// and restarted; and each camera's frame-interval jitter free-running against steered (from a
/// short take's exact frame times). Each
/// beside the clock's own error bound in the same run and the anchors' published figures.
struct SyncBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync", abstract: "Exposure spread by the cameras' own timecode, free-running and steered, across namespace hosts (needs root)."
    )

    @Option(help: "Agent hosts.") var agents: Int = 3
    @Option(help: "Seconds each audit decodes.") var auditSeconds: Int = 10
    @Option(help: "The synthetic cameras' frame rate.") var fps: Double = 30
    @Option(help: "Seconds each take for frame intervals records.") var takeSeconds: Double = 6
    @Option(help: "Namespace prefix (the fleet is torn down at the end).") var prefix: String = "cfs"
    @Option(help: "The test bed script.") var script: String = "deploy/netns-fleet.sh"

    /// Published figures this is put beside.
    static let anchors = [
        "rpicam-vid --sync (one camera model): frame starts within several tens of µs",
        "GigE Vision, IEEE 1588 + scheduled action commands: 2-10 µs",
        "Azure Kinect sync cables: colour exposures within 100 µs",
        "NVIDIA Holoscan sensor bridge, PTP-derived VSYNC: under 1 µs",
    ]

    func run() throws {
        guard NetnsBenchFleet.mayRun("exposure sync") else { return }
        print(
            "== exposure sync: \(agents) agent hosts in network namespaces, links \(NetnsBenchFleet.cleanLink) through `capfleet-relay`, clocks skewed \(NetnsBenchFleet.skews.prefix(agents).joined(separator: " / ")), one synthetic sensor each (±40 ppm oscillator, ±10 µs jitter, 29.6 µs lines at 1080p) filming the timecode, \(fmt(fps)) fps"
        )
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-sync-bench-\(getpid())").path
        let fleet = NetnsFleetScript(script: script, prefix: prefix, data: data)
        defer { fleet.down() }
        let hosts = try NetnsBenchFleet.up(
            fleet, agents: agents,
            agentArguments: "--fps \(fmt(fps)) --synthetic-format 320x240:YUYV --synthetic-overlay timecode@0.2,0.1,0.6 --no-pressure",
            settings: ["cpu_latency_us=0"])
        let ids = hosts.devices.map(\.deviceID)
        // Only real pixels are looked at: the test pattern and its timecode are no one's picture.
        try hosts.grantConsent(ids)
        progress("waiting for \(agents) clocks to lock")
        _ = try hosts.waitForLock(seconds: 30)
        Thread.sleep(forTimeInterval: 2)

        progress("auditing the free-running cameras for \(auditSeconds) s")
        let free = try audit(hosts, ids)
        let clockFree = try clockBound(hosts)
        progress("recording the free-running cameras for \(takeSeconds) s (frame intervals)")
        let jitterFree = try intervalJitter(hosts, ids)

        try hosts.align(ids)
        let intoPhase = try timeToPhase(hosts, ids, seconds: 30)
        Thread.sleep(forTimeInterval: 2)
        progress("auditing the steered cameras for \(auditSeconds) s")
        let steered = try audit(hosts, ids)
        let clockSteered = try clockBound(hosts)
        progress("recording the steered cameras for \(takeSeconds) s (frame intervals)")
        let jitterSteered = try intervalJitter(hosts, ids)

        guard let restarted = hosts.nodeNames.first(where: { $0.value == "a1" })?.key,
            let restartedDevice = hosts.devices.first(where: { $0.nodeID == restarted })?.deviceID
        else { throw BenchFailure("no host a1") }
        let restartedAt = Date()
        try fleet.run(["restart-agent", "1"])
        let relock = try hosts.waitForLock(nodes: [restarted], seconds: 30, heardAfter: restartedAt)
        let backInPhase = try timeToPhase(hosts, [restartedDevice], seconds: 30, since: restartedAt)
        progress("auditing after the restart for \(auditSeconds) s")
        let afterRestart = try audit(hosts, ids)
        let clockAfter = try clockBound(hosts)

        print(
            "\nexposure spread across the \(agents) cameras, by the timecode they filmed (true exposure times; \(free.resolutionNs == 0 ? "exact" : "resolution \(fmt(Double(free.resolutionNs) / 1e3)) µs")):"
        )
        print("  case                median µs  p99 µs   max µs    slots   clock bound (largest node, now)")
        row("free-running", free.exposureSpread, clockFree)
        row("steered", steered.exposureSpread, clockSteered)
        row("after a restart", afterRestart.exposureSpread, clockAfter)
        if free.exposureSpread.samples > 0, steered.exposureSpread.samples > 0 {
            let ratio = Double(free.exposureSpread.medianNs) / max(Double(steered.exposureSpread.medianNs), 1)
            print("  steered median spread is 1/\(fmt(ratio)) of the free-running one in the same run")
        }
        print(
            "\ninto phase (capfleet align until ALIGNED as the coordinator hears it, up to a status report late; per camera): "
                + intoPhase.map { "\(fmt($0)) s" }.joined(separator: ", "))
        print(
            "after SIGKILL and restart of a1: its clock locked in \(fmt(relock)) s, its camera back in phase \(fmt(backInPhase.first ?? 0)) s after the kill"
        )
        print(
            "\nframe-interval jitter (each interval minus the nominal, from a \(fmt(takeSeconds)) s take's exact frame times; rms / max µs over intervals), free-running against steered:"
        )
        for id in ids {
            let free = jitterFree[id], steered = jitterSteered[id]
            print(
                "  \(id): free \(free.map { "\(fmt($0.rmsNs / 1e3)) / \(fmt($0.maxNs / 1e3)) over \($0.intervals)" } ?? "-"); steered \(steered.map { "\(fmt($0.rmsNs / 1e3)) / \(fmt($0.maxNs / 1e3)) over \($0.intervals)" } ?? "-")"
            )
        }
        print(
            "  (the loop changes a frame's length by whole lines, at most 2 % of the interval a frame: steering shows as interval changes of a few lines while the phase is brought in, and of a line or so to hold it)"
        )
        print("\nstamp error (fleet time stamped minus true exposure time), per camera, steered:")
        for camera in steered.cameras where camera.status.isOK {
            print(
                "  \(camera.deviceID): median \(us(camera.stampOffset.medianNs)) p99 \(us(camera.stampOffset.p99Ns)) µs over \(camera.stampOffset.samples) frames; stamps' bound \(fmt(Double(camera.stampUncertaintyNs) / 1e3)) µs"
            )
        }
        print("\nthe anchors' published figures:")
        for anchor in Self.anchors { print("  \(anchor)") }
    }

    private func row(_ name: String, _ figures: Capfleet_V1_AuditFigures, _ bound: Double) {
        print(
            "  " + name.padding(toLength: 18, withPad: " ", startingAt: 0)
                + String(
                    format: " %7.1f  %7.1f  %7.1f  %7d   %.1f µs", Double(figures.medianNs) / 1e3, Double(figures.p99Ns) / 1e3,
                    Double(figures.maxNs) / 1e3, figures.samples, bound / 1e3))
    }

    private func us(_ ns: Int64) -> String { fmt(Double(ns) / 1e3) }

    /// How far each frame interval is from the nominal one.
    struct IntervalJitter {
        var rmsNs: Double
        var maxNs: Double
        var intervals: Int
    }

    /// Records `takeSeconds` of the cameras on the coordinator and reads each camera's frame
    /// intervals from the take's exact frame times (its frame sets: consecutive slots with a
    /// frame of the camera in both).
    private func intervalJitter(_ hosts: NetnsBenchFleet, _ ids: [String]) throws -> [String: IntervalJitter] {
        let take = try hosts.client.call(
            .startRecording(
                .with {
                    $0.deviceIds = ids
                    $0.name = "sync bench intervals"
                    $0.store = .coordinator
                })
        ).reply.takes.first?.id
        guard let take else { throw BenchFailure("the take did not start") }
        Thread.sleep(forTimeInterval: takeSeconds)
        _ = try hosts.client.call(
            .stopRecording(
                .with {
                    $0.takeID = take
                    $0.waitMs = 30_000
                }))
        let sets = try hosts.client.call(
            .getFrameSets(
                .with {
                    $0.takeID = take
                    $0.all = true
                    $0.limit = 10_000
                })
        ).reply.frameSets
        var previous: [UInt32: (slot: UInt64, offset: Int64)] = [:]
        var deviations: [UInt32: [Double]] = [:]
        for set in sets.listed {
            for member in set.members {
                if let last = previous[member.camera], set.slotFleetNs == last.slot + sets.intervalNs {
                    deviations[member.camera, default: []].append(Double(member.offsetNs - last.offset))
                }
                previous[member.camera] = (set.slotFleetNs, member.offsetNs)
            }
        }
        var jitter: [String: IntervalJitter] = [:]
        for (index, camera) in sets.cameras.enumerated() {
            guard let values = deviations[UInt32(index)], !values.isEmpty else { continue }
            jitter[camera.deviceID] = IntervalJitter(
                rmsNs: (values.map { $0 * $0 }.reduce(0, +) / Double(values.count)).squareRoot(),
                maxNs: values.map(abs).max() ?? 0, intervals: values.count)
        }
        return jitter
    }

    private func audit(_ hosts: NetnsBenchFleet, _ ids: [String]) throws -> Capfleet_V1_SyncAuditResult {
        let answer = try hosts.client.call(
            .syncAudit(
                .with {
                    $0.deviceIds = ids
                    $0.seconds = UInt32(auditSeconds)
                }))
        let result = answer.reply.syncAudit
        for camera in result.cameras where !camera.status.isOK {
            print("  \(camera.deviceID): \(camera.status.reason)")
        }
        return result
    }

    /// The largest error bound the nodes report now, ns.
    private func clockBound(_ hosts: NetnsBenchFleet) throws -> Double {
        let nodes = try hosts.client.call(.listNodes(.init())).reply.nodes.filter { hosts.nodeNames[$0.nodeID] != nil }
        return Double(nodes.map(\.clock.uncertaintyNs).max() ?? 0)
    }

    /// Seconds from `since` (now) until each device reports ALIGNED.
    private func timeToPhase(_ hosts: NetnsBenchFleet, _ ids: [String], seconds: Double, since: Date = Date()) throws -> [Double] {
        var reached: [String: Double] = [:]
        let deadline = Date().addingTimeInterval(seconds)
        while reached.count < ids.count, Date() < deadline {
            for device in try hosts.client.call(.listDevices(.init())).reply.devices
            where ids.contains(device.deviceID) && reached[device.deviceID] == nil && device.online && device.alignment.state == .aligned {
                reached[device.deviceID] = Date().timeIntervalSince(since)
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        guard reached.count == ids.count else {
            throw BenchFailure("not in phase within \(fmt(seconds)) s: \(ids.filter { reached[$0] == nil }.joined(separator: ", "))")
        }
        return ids.compactMap { reached[$0] }
    }
}
