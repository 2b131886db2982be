import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import FleetTestSupport
import Foundation

/// Synchronised stills (proto-docs/stills.md) across network-namespace hosts, against known
/// truth: the clock benchmark's test bed (NetnsBenchFleet), one synthetic camera a host.
///
/// Measures, for `--count` stills at the streaming size, each at an instant a second ahead:
/// the spread of the cameras' capture times as the agents stamp them in fleet time
/// (`StillInfo.spread_ns`) and true (each sidecar's `capture_local_ns` with its node's known
/// skew taken out), and each picture's distance to the instant; unaligned first (the
/// baseline), then with frame alignment on and the instant on the fleet-time grid. Then the
/// time from sending TakeStill to every picture stored on the coordinator: at the streaming
/// size (the baseline: no format switch), at full resolution (each camera switches to its
/// 4608x3456 still format and back) and for a bracket of three there, with how long each
/// camera was away from its streaming format and the bytes stored.
struct StillBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stills",
        abstract:
            "Synchronised stills across namespace hosts: capture spread against known truth, aligned and unaligned, and time to stored (needs root).")

    @Option(help: "Stills measured unaligned, then as many aligned.") var count: Int = 10
    @Option(help: "Agent hosts, one synthetic camera each.") var agents: Int = 3
    @Option(help: "The synthetic cameras' frame rate.") var fps: Double = 30
    @Option(help: "The cameras' streaming format, WxH:FOURCC.") var syntheticFormat: String = "640x480:YUYV"
    @Option(help: "Namespace prefix (the fleet is torn down at the end).") var prefix: String = "cfs"
    @Option(help: "The test bed script.") var script: String = "deploy/netns-fleet.sh"

    /// Every instant is this far ahead, the coordinator's default lead.
    static let lead: UInt64 = 1_000_000_000

    func validate() throws {
        guard count >= 1 else { throw ValidationError("--count is at least 1") }
        guard agents >= 2 else { throw ValidationError("--agents is at least 2: a spread needs two cameras") }
        guard fps > 0 else { throw ValidationError("--fps is positive") }
        _ = try streamingSize()
    }

    private func streamingSize() throws -> (width: UInt32, height: UInt32) {
        let size = syntheticFormat.split(separator: ":").first?.lowercased().split(separator: "x").compactMap { UInt32($0) } ?? []
        guard size.count == 2 else { throw ValidationError("--synthetic-format is WxH:FOURCC, e.g. 640x480:YUYV, not \(syntheticFormat)") }
        return (size[0], size[1])
    }

    func run() throws {
        guard NetnsBenchFleet.mayRun("stills") else { return }
        let size = try streamingSize()
        print(
            "== stills: \(agents) agent hosts in network namespaces, links \(NetnsBenchFleet.cleanLink) through `capfleet-relay`, clocks skewed \(NetnsBenchFleet.skews.prefix(agents).joined(separator: " / ")), one synthetic camera each at \(syntheticFormat), \(fmt(fps)) fps"
        )
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-stills-bench-\(getpid())").path
        let fleet = NetnsFleetScript(script: script, prefix: prefix, data: data)
        defer {
            fleet.down()
            try? FileManager.default.removeItem(atPath: data)
        }
        let hosts = try NetnsBenchFleet.up(
            fleet, agents: agents, agentArguments: "--fps \(fmt(fps)) --synthetic-format \(syntheticFormat) --no-pressure")
        let ids = hosts.devices.map(\.deviceID)
        try hosts.grantConsent(ids)
        progress("waiting for \(agents) clocks to lock and the cameras' real frames")
        let locked = try hosts.waitForLock(seconds: 30)
        try waitForDevices(hosts, ids, "delivering real frames", seconds: 20) { $0.realFrames }
        print("all \(agents) clocks locked \(fmt(locked)) s after the fleet was up; consent granted to \(ids.joined(separator: ", "))")

        let taker = StillTaker(hosts: hosts, devices: ids)
        let streaming = Capfleet_V1_TakeStill.with {
            $0.deviceIds = ids
            $0.width = size.width
            $0.height = size.height
        }
        progress("\(count) stills unaligned")
        var unaligned: [StillSpread] = []
        for _ in 0..<count {
            var query = streaming
            query.fromNowNs = Self.lead
            if let spread = try taker.spread(query) { unaligned.append(spread) }
        }

        try hosts.align(ids)
        try waitForDevices(hosts, ids, "aligned to the fleet-time grid", seconds: 30) { $0.alignment.state == .aligned }
        // Aligned cameras deliver the same grid slot for an instant on the grid (stills.md).
        let origin = try hosts.client.call(.listDevices(.init())).reply.devices.first { $0.deviceID == ids[0] }?.alignment.gridOriginFleetNs ?? 0
        let period = UInt64(1e9 / fps)
        progress("\(count) stills aligned, each instant on the grid (origin \(origin), every \(period) ns)")
        var aligned: [StillSpread] = []
        for _ in 0..<count {
            var query = streaming
            let ahead = MonotonicTime.now() &+ hosts.truth.epoch &+ Self.lead
            query.atFleetTimeNs = origin &+ (ahead &- origin &+ period &- 1) / period &* period
            if let spread = try taker.spread(query) { aligned.append(spread) }
        }
        reportSpreads(unaligned: unaligned, aligned: aligned)

        progress("\ntime to stored: a still at the streaming size, at full resolution, and a bracket there")
        var full = streaming
        full.width = 0
        full.height = 0
        var bracket = full
        bracket.bracketEv = [-1, 0, 1]
        let transfers = try [
            ("\(size.width)x\(size.height), streaming size (baseline)", streaming), ("size max (switch to the still format)", full),
            ("size max, bracket -1,0,1", bracket),
        ].map { label, query in
            var query = query
            query.fromNowNs = Self.lead
            return (label, try taker.timeToStored(query))
        }
        reportTransfers(transfers)
    }

    /// Waits until every device in `ids` is `what`.
    private func waitForDevices(
        _ hosts: NetnsBenchFleet, _ ids: [String], _ what: String, seconds: Double,
        _ condition: (Capfleet_V1_DeviceInfo) -> Bool
    ) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let devices = try hosts.client.call(.listDevices(.init())).reply.devices.filter { ids.contains($0.deviceID) }
            let waiting = devices.filter { !condition($0) }
            if devices.count == ids.count, waiting.isEmpty { return }
            guard Date() < deadline else {
                throw BenchFailure(
                    "not \(what) after \(fmt(seconds)) s: "
                        + waiting.map { "\($0.deviceID) (alignment \($0.alignment.state), real frames \($0.realFrames))" }.joined(separator: ", "))
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
    }

    // MARK: reporting

    private func reportSpreads(unaligned: [StillSpread], aligned: [StillSpread]) {
        func figures(_ values: [Double]) -> String {
            let sorted = values.sorted()
            return String(format: "median %9.1f µs, max %9.1f µs", quantile(sorted, 0.5) / 1e3, sorted.last! / 1e3)
        }
        func series(_ label: String, _ stills: [StillSpread]) {
            guard !stills.isEmpty else { return print("\(label): no still with a picture from every camera") }
            print(
                label.padding(toLength: 30, withPad: " ", startingAt: 0)
                    + "\(stills.count) stills    spread: true \(figures(stills.map(\.truth)));  stamped \(figures(stills.map(\.stamped)))")
            let pictures = stills.flatMap(\.stampedToInstant)
            print(
                "".padding(toLength: 30, withPad: " ", startingAt: 0)
                    + "\(pictures.count) pictures  to the instant: stamped |spread_ns| \(figures(pictures));  true \(figures(stills.flatMap(\.trueToInstant)))"
            )
        }
        print(
            "\ncapture times of the \(agents) cameras' pictures, each still at \(syntheticFormat) an instant 1 s ahead (true: the sidecar's capture_local_ns without its node's known skew; stamped: the agents' fleet times):"
        )
        series("unaligned (baseline)", unaligned)
        series("aligned, instant on the grid", aligned)
        if !unaligned.isEmpty, !aligned.isEmpty {
            print(
                String(
                    format: "  ratio aligned/unaligned of the median true spread: %.4f (frame interval %.1f ms)",
                    quantile(aligned.map(\.truth).sorted(), 0.5) / max(quantile(unaligned.map(\.truth).sorted(), 0.5), 1), 1000 / fps))
        }
    }

    private func reportTransfers(_ transfers: [(String, StillTransfer?)]) {
        print(
            "\nrequest → every picture stored on the coordinator (TakeStill to GetStill \"stored\"; the instant 1 s ahead, agents' collect_rate_mb as configured):"
        )
        let baseline = transfers.first?.1?.seconds
        for (label, transfer) in transfers {
            guard let transfer else {
                print(label.padding(toLength: 40, withPad: " ", startingAt: 0) + "no time: the still was not stored whole (above)")
                continue
            }
            let ratio = baseline.map { String(format: "x%.2f", transfer.seconds / $0) } ?? "-"
            print(
                label.padding(toLength: 40, withPad: " ", startingAt: 0)
                    + String(
                        format: "%7.2f s  %@ the baseline   (agents answered at %.2f s, the copy took %.2f s after)",
                        transfer.seconds, ratio, transfer.answered, transfer.seconds - transfer.answered))
            print(
                "".padding(toLength: 40, withPad: " ", startingAt: 0)
                    + "\(transfer.images.count) pictures \(transfer.size), \(RecordingViews.bytes(transfer.bytes)) stored; away from streaming: "
                    + transfer.away.map { String(format: "%.1f ms", Double($0) / 1e6) }.joined(separator: " / ")
                    + String(
                        format: "; spread across the cameras %.1f µs, |spread_ns| to the instant max %.1f µs",
                        Double(transfer.still.spreadNs) / 1e3, transfer.farthest / 1e3))
        }
    }
}
