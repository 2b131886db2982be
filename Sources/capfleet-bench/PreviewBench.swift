import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import FleetTestSupport
import Foundation

/// What previews cost an agent: one synthetic YUYV camera (640x480, then 1920x1080) at 15 fps
/// with consent granted (real previews, the costlier kind), measured with previews off (an
/// agent settings file saying `preview = off`) and on (the defaults: 320 pixels wide, once a
/// second): the whole agent's CPU, the preview thread's own (the precise figure: the whole
/// agent's difference drowns in the synthetic camera's rendering), previews a second at the
/// coordinator and a preview's size.
struct PreviewBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "preview", abstract: "Agent CPU for previews (one a second) of a 640x480 and a 1920x1080 YUYV camera, on versus off.")

    @Option(help: "Seconds measured per configuration.") var seconds: Double = 20

    func run() throws {
        let fleet = try LocalFleet(
            directory: FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-preview-bench-\(getpid())").path,
            ports: try FleetPorts.free(record: false, metrics: false), output: .standardError)
        defer { fleet.remove() }
        let credential = try fleet.operatorCredential(for: "bench", role: "admin")
        try fleet.startCoordinator(arguments: ["--log-level", "error"])
        let off = fleet.directory + "/previews-off.conf"
        try "preview = off\n".write(toFile: off, atomically: true, encoding: .utf8)
        print("== preview cost: one synthetic YUYV camera at 15 fps, consent granted, \(fmt(seconds)) s per configuration")
        print("camera        previews        agent CPU   preview thread   previews/s   preview bytes")
        for size in ["640x480", "1920x1080"] {
            for (label, extra) in [("off", ["--config", off]), ("on (1/s)", [])] {
                let name = "cam-\(size)-\(label == "off" ? "off" : "on")"
                let agent = try fleet.startAgent(
                    name,
                    arguments: [
                        "--synthetic", "1", "--no-discover", "--synthetic-format", "\(size):YUYV",
                        "--fps", "15", "--log-level", "error",
                    ] + extra)
                defer { _ = agent.stop() }
                let client = try OperatorClient(address: fleet.operatorAddress, credential: credential)
                let device = try waitForDevice(client, node: name)
                try client.grantTestPatternConsent(device)
                Thread.sleep(forTimeInterval: 3)  // streaming, previews real
                let pid = agent.processIdentifier
                let start = MonotonicTime.now()
                let cpu = TelemetryBenchFleet.cpuNanoseconds(pid: pid)
                let thread = TelemetryBenchFleet.cpuNanoseconds(pid: pid, namePrefix: "cf-preview")
                let received = try previewsReceived(client, device: device)
                Thread.sleep(forTimeInterval: seconds)
                let elapsed = Double(MonotonicTime.now() - start) / 1e9
                let agentCPU = Double(TelemetryBenchFleet.cpuNanoseconds(pid: pid) &- cpu) / 1e9 / elapsed * 100
                let threadCPU = Double(TelemetryBenchFleet.cpuNanoseconds(pid: pid, namePrefix: "cf-preview") &- thread) / 1e9 / elapsed * 100
                let rate = Double(try previewsReceived(client, device: device) - received) / elapsed
                // With previews off the coordinator has none to show (and says so as an error).
                let bytes = rate > 0 ? try client.call(.getPreview(.with { $0.deviceID = device })).reply.previews.first?.jpeg.count : nil
                print(
                    size.padding(toLength: 14, withPad: " ", startingAt: 0) + label.padding(toLength: 14, withPad: " ", startingAt: 0)
                        + String(format: "  %6.2f %%      %7.3f %%       %5.2f      ", agentCPU, threadCPU, rate) + (bytes.map(String.init) ?? "none")
                )
            }
        }
    }

    private func waitForDevice(_ client: OperatorClient, node name: String) throws -> String {
        for _ in 0..<200 {
            let nodes = try client.call(.listNodes(.init())).reply.nodes
            if let node = nodes.first(where: { $0.name == name && $0.online }),
                let device = try client.call(.listDevices(.with { $0.nodeID = node.nodeID })).reply.devices.first
            {
                return device.deviceID
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
        throw BenchFailure("agent \(name) did not register a camera within 20 s")
    }

    private func previewsReceived(_ client: OperatorClient, device: String) throws -> UInt64 {
        try client.call(.getFleetStats(.init())).reply.deviceStats.first { $0.deviceID == device }?.previewsReceived ?? 0
    }
}
