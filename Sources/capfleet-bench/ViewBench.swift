import ArgumentParser
import FleetBus
import FleetClient
import FleetCore
import FleetProtocol
import FleetTestSupport
import Foundation

/// One full-rate viewer of a 1920x1080 YUYV camera at 30 fps, through the coordinator's live
/// endpoint (frames.md, "Live frames on demand"): frames a second delivered against frames a
/// second captured in the same run, and latency from capture to the viewer, p50 and p99, beside
/// the agent's own part of it (capture to handing the frame to its socket) as the baseline.
struct ViewBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "view", abstract: "One viewer of a 1080p30 camera through the coordinator: frames/s delivered and capture-to-viewer latency.")

    @Option(help: "Seconds measured.") var seconds: Double = 10

    func run() throws {
        let fleet = try LocalFleet(
            directory: FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-view-bench-\(getpid())").path,
            ports: try FleetPorts.free(record: false, metrics: false), output: .standardError)
        defer { fleet.remove() }
        let credential = try fleet.operatorCredential(for: "bench", role: "admin")
        try fleet.startCoordinator(arguments: ["--log-level", "error"])
        try fleet.startAgent(
            "viewed",
            arguments: [
                "--synthetic", "1", "--no-discover", "--synthetic-format", "1920x1080:YUYV", "--fps", "30",
                "--no-pressure", "--log-level", "error",
            ])
        let client = try OperatorClient(address: fleet.operatorAddress, credential: credential)
        var device: String?
        for _ in 0..<200 where device == nil {
            device = try client.call(.listDevices(.init())).reply.devices.first { $0.online }?.deviceID
            if device == nil { Thread.sleep(forTimeInterval: 0.1) }
        }
        guard let device else { throw BenchFailure("the agent did not register its camera within 20 s") }
        // Real pixels: a black frame is cheaper to make than the camera's own.
        try client.grantTestPatternConsent(device)

        let viewer = try ZMQSocket(context: ZMQContext(), type: .sub)
        try viewer.makeCurveClient(serverKey: credential.coordinatorKey, keys: credential.keys)
        try viewer.subscribe(LiveTopic.frames(device))
        try viewer.connect("tcp://127.0.0.1:\(fleet.ports.livePort)")
        let warmUp = MonotonicTime.now() + 2_000_000_000
        while MonotonicTime.now() < warmUp {
            if viewer.waitForInput(milliseconds: 100) { while (try viewer.receiveMultipart(dontWait: true, maxParts: 3)) != nil {} }
        }

        func captured() throws -> UInt64 {
            try client.call(.getFleetStats(.init())).reply.deviceStats.first { $0.deviceID == device }?.framesCaptured ?? 0
        }
        let capturedBefore = try captured()
        var toViewer: [Double] = []
        var toSocket: [Double] = []
        var gaps: UInt64 = 0
        var last: UInt64?
        let start = MonotonicTime.now()
        let end = start + UInt64(seconds * 1e9)
        while MonotonicTime.now() < end {
            guard viewer.waitForInput(milliseconds: 100) else { continue }
            while let message = try viewer.receiveMultipart(dontWait: true, maxParts: 3), message.parts.count == 3 {
                let arrived = MonotonicTime.now()
                let header = try Capfleet_V1_FrameHeader(serializedBytes: message.parts[1].array)
                // One machine, one CLOCK_MONOTONIC: the agent's capture time reads on ours.
                toViewer.append(Double(arrived &- header.captureMonotonicNs) / 1e6)
                toSocket.append(Double(header.sendMonotonicNs &- header.captureMonotonicNs) / 1e6)
                if let last, header.sequence > last + 1 { gaps += header.sequence - last - 1 }
                last = header.sequence
            }
        }
        let elapsed = Double(MonotonicTime.now() - start) / 1e9
        // The status is a second behind: the camera's rate over the same span, read after it.
        Thread.sleep(forTimeInterval: 1.2)
        let capturedRate = Double(try captured() - capturedBefore) / (elapsed + 1.2)
        let delivered = Double(toViewer.count) / elapsed
        func percentile(_ values: [Double], _ p: Double) -> Double {
            guard !values.isEmpty else { return .nan }
            let sorted = values.sorted()
            return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
        }
        print("== view: one viewer of a 1920x1080 YUYV camera at 30 fps through the coordinator's live endpoint, \(fmt(elapsed)) s")
        print(
            String(
                format: "frames delivered: %.1f/s against %.1f/s captured (%.2fx), %llu not delivered to the viewer",
                delivered, capturedRate, delivered / max(capturedRate, 0.001), gaps))
        print(
            String(
                format: "latency capture → viewer: p50 %.1f ms, p99 %.1f ms; of it capture → the agent's socket (baseline): p50 %.1f ms, p99 %.1f ms",
                percentile(toViewer, 0.5), percentile(toViewer, 0.99), percentile(toSocket, 0.5), percentile(toSocket, 0.99)))
    }
}
