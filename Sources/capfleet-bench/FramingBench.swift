import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import FleetTestSupport
import Foundation

/// What auto-framing costs and how fast it reframes (detection.md, "Auto-framing"):
/// - the framer's own work on the capture thread (`AutoFramer.advance` per frame) and on the
///   detection thread (`observe` per examined frame), against copying one frame of the camera's
///   size, which the capture path does anyway, in the same run;
/// - reframing latency in the model at 30 fps with detection at 5 fps: from a face jumping
///   across the frame to the crop holding it, and to the crop settled on it;
/// - a real agent's CPU with one synthetic camera and the NASA portrait gliding across it:
///   faces found without framing, against with framing, for the same seconds.
struct FramingBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "framing", abstract: "Auto-framing's cost per frame and per camera, and its reframing latency.")

    @Option(help: "Seconds of agent CPU measured per configuration.") var seconds: Double = 8
    @Option(help: "The camera's size (NV12; framing needs 1280 wide or more).") var size: String = "1280x720"
    @Option(help: "Its frame rate.") var fps: Double = 30
    @Option(help: "The portrait that glides across the frame (Debian's python3-skimage astronaut.png).") var portrait: String =
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent(".build-test-assets/astronaut.png").path

    func run() throws {
        let dimensions = size.split(separator: "x").compactMap { Int($0) }
        guard dimensions.count == 2, dimensions[0] >= FramingSettings.minimumFormatWidth else {
            throw BenchFailure("--size is WxH, at least \(FramingSettings.minimumFormatWidth) wide")
        }
        modelCost(width: dimensions[0], height: dimensions[1])
        latency(width: dimensions[0], height: dimensions[1])
        try agentCost()
    }

    private func modelCost(width: Int, height: Int) {
        let frames = 1_000_000
        var framer = AutoFramer(settings: .standard, width: width, height: height)
        let period = UInt64(1e9 / fps)
        var sink = 0.0
        let started = MonotonicTime.now()
        for index in 0..<frames {
            let time = UInt64(index) * period
            if index % 6 == 0 {
                let x = 0.05 + 0.5 * Double(index % 600) / 600
                framer.observe(faces: [NormalizedRect(x: x, y: 0.3, width: 0.1, height: 0.18)], at: time)
            }
            sink += framer.advance(to: time).x
        }
        let perFrame = Double(MonotonicTime.now() - started) / Double(frames)
        let frameBytes = width * height * 3 / 2
        let source = UnsafeMutableRawPointer.allocate(byteCount: frameBytes, alignment: 64)
        let target = UnsafeMutableRawPointer.allocate(byteCount: frameBytes, alignment: 64)
        defer {
            source.deallocate()
            target.deallocate()
        }
        source.initializeMemory(as: UInt8.self, repeating: 1, count: frameBytes)
        let copies = 200
        let copyStart = MonotonicTime.now()
        for _ in 0..<copies { target.copyMemory(from: source, byteCount: frameBytes) }
        let perCopy = Double(MonotonicTime.now() - copyStart) / Double(copies)
        print("== auto-framing: the framer's work at \(fmt(fps)) fps, detection every 6th frame (\(frames) frames; \(sink > 0 ? "ran" : "-"))")
        print(
            String(
                format: "framer per frame %.0f ns (observe included) · copying one %@ NV12 frame %.0f µs · framer / copy %.5f", perFrame,
                size, perCopy / 1000, perFrame / perCopy))
    }

    private func latency(width: Int, height: Int) {
        let settings = FramingSettings.standard
        var framer = AutoFramer(settings: settings, width: width, height: height)
        let period = UInt64(1e9 / fps)
        let left = NormalizedRect(x: 0.1, y: 0.35, width: 0.1, height: 0.18), right = NormalizedRect(x: 0.8, y: 0.35, width: 0.1, height: 0.18)
        var time: UInt64 = 0
        for index in 0..<Int(fps * 5) {
            time = UInt64(index) * period
            if index % 6 == 0 { framer.observe(faces: [left], at: time) }
            _ = framer.advance(to: time)
        }
        let jump = time + period
        var holding: Double?, settled: Double?
        for index in 1..<Int(fps * 20) {
            let now = jump + UInt64(index - 1) * period
            if (index - 1) % 6 == 0 { framer.observe(faces: [right], at: now) }
            let crop = framer.advance(to: now)
            let seconds = Double(now - jump) / 1e9
            if holding == nil, crop.x <= right.x, crop.x + crop.width >= right.x + right.width { holding = seconds }
            if settled == nil, crop == framer.target, framer.target != .whole, framer.target.x > 0.4 { settled = seconds }
            if holding != nil, settled != nil { break }
        }
        let distance = abs((right.x - left.x))
        print(
            "== reframing latency (model, \(fmt(fps)) fps, detection 5 fps, hold \(settings.holdSeconds) s, at most \(settings.maximumSpeed) frame widths a second): a face jumping \(fmt(distance * 100)) % of the frame across"
        )
        print(
            "crop holds the face after \(holding.map { String(format: "%.2f s", $0) } ?? "never") · settled after \(settled.map { String(format: "%.2f s", $0) } ?? "never") · bound: hold + distance / speed = \(String(format: "%.2f s", settings.holdSeconds + distance / settings.maximumSpeed))"
        )
    }

    private func agentCost() throws {
        guard FileManager.default.fileExists(atPath: portrait) else {
            print("== auto-framing on an agent: skipped, no portrait at \(portrait) (scripts/test.sh fetches it into .build-test-assets)")
            return
        }
        let fleet = try LocalFleet(
            directory: FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-framing-bench-\(getpid())").path,
            ports: try FleetPorts.free(record: false, metrics: false), output: .standardError)
        defer { fleet.remove() }
        let credential = try fleet.operatorCredential(for: "bench", role: "admin")
        try fleet.startCoordinator(arguments: ["--log-level", "error"])
        let agent = try fleet.startAgent(
            "framing",
            arguments: [
                "--synthetic", "1", "--no-discover", "--synthetic-format", "\(size):NV12", "--fps", "\(fps)", "--log-level", "error",
                "--synthetic-overlay", "image:\(portrait)@0.05,0.25,0.3,0.6,\(Int(fps * 4))",
            ])
        defer { _ = agent.stop() }
        let client = try OperatorClient(address: fleet.operatorAddress, credential: credential)
        var device: String?
        for _ in 0..<200 where device == nil {
            device = try client.call(.listDevices(.init())).reply.devices.first?.deviceID
            if device == nil { Thread.sleep(forTimeInterval: 0.1) }
        }
        guard let device else { throw BenchFailure("the agent did not register its camera within 20 s") }
        try client.grantTestPatternConsent(device)
        _ = try client.call(.lockDevice(.with { $0.deviceID = device }))
        print(
            "== auto-framing on an agent: one synthetic \(size) NV12 camera at \(fmt(fps)) fps, the portrait gliding across it, \(fmt(seconds)) s each"
        )
        print("configuration            agent CPU   against faces only")
        var facesOnly: Double?
        let pid = agent.processIdentifier
        for (name, framing) in [("faces only", nil), ("faces + framing", FramingSettings.standard)] as [(String, FramingSettings?)] {
            let settings = DetectionSettings(codes: [], faces: true, framing: framing)
            let reply = try client.call(
                .changeDetection(
                    .with {
                        $0.deviceID = device
                        $0.settings = settings.wire
                    }), timeout: 15)
            guard reply.reply.status.code == .ok else { throw BenchFailure("\(name) refused: \(reply.reply.status.reason)") }
            Thread.sleep(forTimeInterval: 3)  // the cascade loaded, the crop moving
            let cpu = TelemetryBenchFleet.cpuNanoseconds(pid: pid)
            let start = MonotonicTime.now()
            Thread.sleep(forTimeInterval: seconds)
            let used = Double(TelemetryBenchFleet.cpuNanoseconds(pid: pid) &- cpu) / 1e9 / (Double(MonotonicTime.now() - start) / 1e9) * 100
            if framing == nil { facesOnly = used }
            print(
                name.padding(toLength: 25, withPad: " ", startingAt: 0) + String(format: "%6.1f %%   ", used)
                    + (facesOnly.map { $0 > 0 ? String(format: "%.2fx", used / $0) : "-" } ?? "-"))
        }
        print("(framing adds the crop's step per frame to faces found; the pixels are not touched)")
    }
}
