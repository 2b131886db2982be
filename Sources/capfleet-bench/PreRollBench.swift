import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import FleetTestSupport
import Foundation

/// What a camera's pre-roll costs its agent (recordings.md, "Pre-roll"): one synthetic YUYV
/// camera (1920x1080 at 30 fps by default), consent granted, with pre-roll off and then keeping
/// each of a few durations, within a budget that holds them: the agent's resident memory at
/// the start and the end of each window (with pre-roll off it must stay flat: nothing kept,
/// nothing spent), what it keeps, and its CPU, each against pre-roll off in the same run; then
/// kept encoded on the host (recordings.md, "Encoded pre-roll") for longer durations within
/// the default budget, where the encoder's CPU is the price of the memory saved.
struct PreRollBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "preroll", abstract: "Agent memory and CPU for a camera's pre-roll (raw frames, then encoded), off against kept.")

    @Option(help: "Seconds measured per configuration.") var seconds: Double = 10
    @Option(help: "The pre-roll durations measured after off, in seconds, comma-separated.") var keep: String = "2,5"
    @Option(help: "The camera's size (YUYV).") var size: String = "1920x1080"
    @Option(help: "Its frame rate.") var fps: Double = 30
    @Option(help: "The encoded pre-roll durations measured after the raw ones, in seconds, comma-separated; empty: none.")
    var encoded: String = "10,30"
    @Option(help: "The encoded pre-roll's codec: h264, hevc or ffv1.") var codec: String = "h264"

    func run() throws {
        let durations = keep.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }.filter { $0 > 0 && $0 <= 60 }
        let encodedDurations = encoded.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }.filter {
            $0 > 0 && $0 <= 60
        }
        guard let chosen = VideoCodec(rawValue: codec), chosen != .raw else { throw BenchFailure("--codec is h264, hevc or ffv1") }
        let dimensions = size.split(separator: "x").compactMap { Int($0) }
        guard dimensions.count == 2, !durations.isEmpty else { throw BenchFailure("--size is WxH and --keep lists seconds from 0 to 60") }
        let frameBytes = dimensions[0] * dimensions[1] * 2
        let fleet = try LocalFleet(
            directory: FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-preroll-bench-\(getpid())").path,
            ports: try FleetPorts.free(record: false, metrics: false), output: .standardError)
        defer { fleet.remove() }
        let credential = try fleet.operatorCredential(for: "bench", role: "admin")
        try fleet.startCoordinator(arguments: ["--log-level", "error"])
        let agent = try fleet.startAgent(
            "preroll",
            arguments: ["--synthetic", "1", "--no-discover", "--synthetic-format", "\(size):YUYV", "--fps", "\(fps)", "--log-level", "error"])
        defer { _ = agent.stop() }
        let client = try OperatorClient(address: fleet.operatorAddress, credential: credential)
        let device = try waitForDevice(client)
        try client.grantTestPatternConsent(device)
        _ = try client.call(.lockDevice(.with { $0.deviceID = device }))
        Thread.sleep(forTimeInterval: 3)  // streaming real frames
        print(
            "== pre-roll cost: one synthetic \(size) YUYV camera at \(fmt(fps)) fps (\(frameBytes >> 10) KiB a frame), consent granted, \(fmt(seconds)) s per configuration"
        )
        print("pre-roll        budget      RSS at start   RSS at end   RSS vs off    kept                           agent CPU   CPU vs off")
        let pid = agent.processIdentifier
        var offRSS: Double?
        var offCPU: Double?
        let configurations = [(0, nil)] + durations.map { ($0, nil) } + encodedDurations.map { ($0, TakeEncoding(codec: chosen)) }
        for (duration, encoding) in configurations as [(Double, TakeEncoding?)] {
            // Raw: a budget that holds the whole duration, a tenth spare, so the figure is the
            // frames' cost. Encoded: the default budget, which the packets come nowhere near.
            let budget =
                duration == 0
                ? 0 : encoding != nil ? UInt64(PreRollSettings.defaultBudgetBytes) : UInt64((duration * fps * Double(frameBytes) * 1.1).rounded(.up))
            let reply = try client.call(
                .changePreRoll(
                    .with {
                        $0.deviceID = device
                        $0.milliseconds = UInt32(duration * 1000)
                        $0.budgetBytes = max(budget, 1 << 20)
                        if let encoding { $0.encoding = encoding.wire }
                    }))
            guard reply.reply.status.code == .ok else { throw BenchFailure("pre-roll \(duration) s refused: \(reply.reply.status.reason)") }
            Thread.sleep(forTimeInterval: duration + 2)  // filled, and settled
            let rssStart = TransportBench.residentMegabytes(pid: pid)
            let cpu = TelemetryBenchFleet.cpuNanoseconds(pid: pid)
            let start = MonotonicTime.now()
            Thread.sleep(forTimeInterval: seconds)
            let elapsed = Double(MonotonicTime.now() - start) / 1e9
            let agentCPU = Double(TelemetryBenchFleet.cpuNanoseconds(pid: pid) &- cpu) / 1e9 / elapsed * 100
            let rssEnd = TransportBench.residentMegabytes(pid: pid)
            let kept = try client.call(.getDevice(.with { $0.deviceID = device })).reply.devices.first?.preRoll ?? .init()
            if duration == 0 { (offRSS, offCPU) = (rssEnd, agentCPU) }
            let keptText =
                kept.keptFrames == 0
                ? "nothing"
                : "\(kept.keptFrames) frames, \(String(format: "%.1f", Double(kept.keptBytes) / 1_048_576)) MiB, \(String(format: "%.1f", Double(kept.keptNs) / 1e9)) s"
            let label = duration == 0 ? "off" : "\(fmt(duration)) s" + (encoding.map { " \($0.codec.rawValue)" } ?? " raw")
            print(
                label.padding(toLength: 16, withPad: " ", startingAt: 0)
                    + (budget == 0 ? "-" : "\(budget >> 20) MiB").padding(toLength: 12, withPad: " ", startingAt: 0)
                    + String(format: "%8.1f MiB   %8.1f MiB  ", rssStart, rssEnd)
                    + (offRSS.map { String(format: "%+8.1f MiB   ", rssEnd - $0) } ?? "             ")
                    + keptText.padding(toLength: 31, withPad: " ", startingAt: 0)
                    + String(format: "%6.1f %%   ", agentCPU) + (offCPU.map { $0 > 0 ? String(format: "%.2fx", agentCPU / $0) : "-" } ?? "-"))
        }
        print("(with pre-roll off the agent's memory should not grow from the window's start to its end: nothing is kept)")
        print("(encoded: the memory is the packets and one encoder's; the CPU is that encoder's, which a take in the same codec then shares)")
    }

    private func waitForDevice(_ client: OperatorClient) throws -> String {
        for _ in 0..<200 {
            if let node = try client.call(.listNodes(.init())).reply.nodes.first(where: { $0.name == "preroll" && $0.online }),
                let device = try client.call(.listDevices(.with { $0.nodeID = node.nodeID })).reply.devices.first
            {
                return device.deviceID
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
        throw BenchFailure("the agent did not register its camera within 20 s")
    }
}
