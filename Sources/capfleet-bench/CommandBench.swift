import ArgumentParser
import FleetBus
import FleetClient
import FleetCore
import FleetProtocol
import FleetSystem
import FleetTestSupport
import Foundation

/// Command latency and zoom-ramp accuracy, end to end through real processes: a
/// `capfleet coordinator` and a `capfleet agent` with one synthetic camera at 60 fps.
/// Latency is from sending `ChangeZoom` to the capture time of the first frame that
/// carries the new factor (both on this host's CLOCK_MONOTONIC); the baseline, measured in
/// the same run, is the camera's frame interval, so the ratio reads as "frames until the
/// command shows".
struct CommandBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "commands", abstract: "Zoom command latency (p50/p99 over N commands) and ramp accuracy against the exact curve.")
    @Option(help: "Zoom commands to time.") var commands: Int = 200
    @Option(help: "The synthetic camera's frame rate.") var fps: Double = 60

    func run() throws {
        // A coordinator and one agent with a synthetic camera, as child processes on free ports.
        let fleet = try LocalFleet(
            directory: FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-bench-commands-\(getpid())").path,
            ports: try FleetPorts.free(record: false, metrics: false), output: .standardError)
        defer { fleet.remove() }
        let credential = try fleet.operatorCredential(for: "bench", role: "admin")
        try fleet.startCoordinator(arguments: ["--log-level", "error"])
        try fleet.startAgent("bench", arguments: ["--synthetic", "1", "--no-discover", "--fps", "\(fps)", "--log-level", "error"])
        let client = try OperatorClient(address: fleet.operatorAddress, credential: credential, timeout: 5)
        var device = ""
        try fleet.waitUntilBlocking("the benchmark's agent registers its camera", seconds: 10) {
            guard let online = try client.call(.listDevices(.init())).reply.devices.first(where: \.online) else { return false }
            device = online.deviceID
            return true
        }
        _ = try client.call(
            .lockDevice(
                .with {
                    $0.deviceID = device; $0.seconds = 600
                }))
        let frames = FrameTap(client: try OperatorClient(address: client.address, credential: credential, timeout: 5), device: device)
        frames.start()
        defer { frames.stop() }
        _ = frames.waitForFrames(after: MonotonicTime.now(), count: 5)

        // Latency: alternate 1x and 2x so every command changes what frames carry.
        var latencies: [Double] = []
        var roundTrips: [Double] = []
        for index in 0..<commands {
            let factor = index % 2 == 0 ? 2.0 : 1.0
            // A random phase against the camera's frame clock, so latencies sample the whole interval.
            Thread.sleep(forTimeInterval: Double.random(in: 0..<(1 / fps)))
            let sent = MonotonicTime.now()
            _ = try client.call(
                .changeZoom(
                    .with {
                        $0.deviceID = device; $0.factor = factor
                    }))
            roundTrips.append(Double(MonotonicTime.now() - sent) / 1e6)
            guard let first = frames.firstFrame(after: sent, where: { abs($0.zoom - factor) < 1e-6 }, timeout: 2) else {
                throw BenchFailure("no frame carried zoom \(factor)x within 2 s of command \(index)")
            }
            latencies.append(Double(Int64(first.captured) - Int64(sent)) / 1e6)
        }
        let interval = 1000 / fps
        let p50 = Self.percentile(latencies, 0.5), p99 = Self.percentile(latencies, 0.99)
        print("zoom command → first frame carrying it, \(commands) commands, synthetic camera at \(VideoFormat.trim(fps)) fps:")
        print(
            String(
                format: "  p50 %.1f ms  p99 %.1f ms  max %.1f ms   (command round trip p50 %.1f ms)",
                p50, p99, latencies.max() ?? 0, Self.percentile(roundTrips, 0.5)))
        print(String(format: "  baseline frame interval %.1f ms → ratio p50 %.2f, p99 %.2f frames", interval, p50 / interval, p99 / interval))

        // Ramp accuracy: 1x → 4x at rate 1 (one octave a second), frame by frame.
        _ = try client.call(
            .changeZoom(
                .with {
                    $0.deviceID = device; $0.factor = 1
                }))
        Thread.sleep(forTimeInterval: 0.3)
        let rampStart = MonotonicTime.now()
        _ = try client.call(
            .changeZoom(
                .with {
                    $0.deviceID = device; $0.factor = 4; $0.rampRate = 1
                }))
        Thread.sleep(forTimeInterval: 3.2)
        // From the first frame that moved to the first that arrived.
        var ramp = frames.frames(after: rampStart).filter { $0.zoom > 1 + 1e-9 }
        if let arrival = ramp.firstIndex(where: { $0.zoom >= 4 - 1e-9 }) { ramp = Array(ramp[...arrival]) }
        print(Self.rampReport(ramp, rate: 1, from: 1, to: 4, frameInterval: interval))
    }

    /// Compares the ramp's cruising part (where the eased rate has reached the command's)
    /// with the exact exponential: log2(factor) rising by `rate` per second.
    static func rampReport(_ frames: [FrameTap.Frame], rate: Double, from: Double, to: Double, frameInterval: Double) -> String {
        guard frames.count > 10, let first = frames.first, let last = frames.last else {
            return "zoom ramp: too few frames captured during the ramp (\(frames.count))"
        }
        let duration = Double(last.captured - first.captured) / 1e9
        let ideal = log2(to / from) / rate
        // Per-frame slope of log2(factor), against the commanded rate.
        var slopes: [Double] = []
        for (a, b) in zip(frames, frames.dropFirst()) where b.captured > a.captured {
            slopes.append((log2(b.zoom) - log2(a.zoom)) / (Double(b.captured - a.captured) / 1e9))
        }
        let cruising = slopes.filter { $0 > rate * 0.98 }
        let errors = cruising.map { abs($0 - rate) / rate * 100 }
        // The exact curve through the cruising frames' midpoint, and each frame's distance from it.
        let cruise = frames.filter { frame in
            let t = Double(frame.captured - first.captured) / 1e9
            return t > 0.25 * duration && t < 0.75 * duration
        }
        var deviation = 0.0
        if let anchor = cruise.first {
            for frame in cruise {
                let t = Double(frame.captured - anchor.captured) / 1e9
                let exact = log2(anchor.zoom) + rate * t
                deviation = max(deviation, abs(log2(frame.zoom) - exact))
            }
        }
        let reached = last.zoom
        return String(
            format: """
                zoom ramp 1x → 4x at rate 1 (doubling every second), %d frames:
                  cruising at %.4f octaves/s (mean of %d frame-to-frame slopes; max error %.2f %%), \
                max distance from the exact exponential through the middle half %.5f octaves (%.3f %% in factor)
                  took %.2f s against %.2f s without easing; ended at %.4fx (asked 4x)
                """, frames.count, cruising.isEmpty ? 0 : cruising.reduce(0, +) / Double(cruising.count), cruising.count,
            errors.max() ?? 0, deviation, (exp2(deviation) - 1) * 100, duration, ideal, reached)
    }

    static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * fraction).rounded()))]
    }
}

/// Every frame of one device as the coordinator hands it out (GetLatestFrame waits for
/// the next frame to arrive), kept with its capture time and zoom, on a thread of its own.
final class FrameTap: @unchecked Sendable {
    struct Frame {
        let sequence: UInt64
        let captured: UInt64
        let zoom: Double
    }

    private let client: OperatorClient
    private let device: String
    private let lock = NSCondition()
    private var collected: [Frame] = []
    private var running = true
    private let thread = OwnedThread(name: "cf-bench-tap")

    init(client: OperatorClient, device: String) {
        self.client = client
        self.device = device
    }

    func start() {
        thread.start {
            while self.lock.withLock({ self.running }) {
                guard let header = try? self.client.call(.getLatestFrame(.with { $0.deviceID = self.device })).reply.frameHeader else { continue }
                self.lock.withLock {
                    if self.collected.last.map({ $0.sequence < header.sequence }) ?? true {
                        self.collected.append(
                            Frame(
                                sequence: header.sequence, captured: header.captureMonotonicNs,
                                zoom: header.zoomFactor > 0 ? header.zoomFactor : 1))
                    }
                    self.lock.broadcast()
                }
            }
        }
    }

    func stop() {
        lock.withLock { running = false }
        thread.joinBlocking()
    }

    func frames(after time: UInt64) -> [Frame] { lock.withLock { collected.filter { $0.captured >= time } } }

    func waitForFrames(after time: UInt64, count: Int) -> Bool {
        let deadline = Date().addingTimeInterval(5)
        return lock.withLock {
            while collected.filter({ $0.captured >= time }).count < count {
                if !lock.wait(until: deadline) { return false }
            }
            return true
        }
    }

    /// The earliest frame captured after `time` that matches.
    func firstFrame(after time: UInt64, where matches: (Frame) -> Bool, timeout: Double) -> Frame? {
        let deadline = Date().addingTimeInterval(timeout)
        return lock.withLock {
            while true {
                if let frame = collected.first(where: { $0.captured >= time && matches($0) }) { return frame }
                if !lock.wait(until: deadline) { return nil }
            }
        }
    }
}
