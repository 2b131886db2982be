import ArgumentParser
import FleetBus
import FleetClient
import FleetCore
import FleetProtocol
import FleetTestSupport
import Foundation
import Synchronization

/// How many sensor samples a second one agent takes in and delivers without loss (issue
/// "sound and other sensors"; proto-docs/sensors.md), and what they cost it.
///
/// One `capfleet agent` child offering the stream `bench` beside a small synthetic camera, its
/// consent granted, fed by a PUSH socket of this process on the agent's sensor endpoint:
/// messages of `--batch` six-channel samples stamped with CLOCK_MONOTONIC, at each rate in
/// turn. A subscriber on the coordinator's telemetry counts the readings that arrive on
/// `data.<node>.bench` (what a take would record); the agent's CPU comes from /proc. Baseline:
/// the same agent over the same time with nothing sent.
struct SensorBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sensors", abstract: "Sensor samples a second one agent delivers without loss, and its CPU for them.")

    @Option(help: "Samples a second to try, in order (comma-separated).") var rates = "1000,10000,100000,400000,800000"
    @Option(help: "Seconds per rate.") var seconds: Double = 5
    @Option(help: "Samples per message, 1 to 1000.") var batch = 100

    func run() throws {
        let steps = rates.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }.filter { $0 > 0 }
        guard !steps.isEmpty, (1...1000).contains(batch) else { throw ValidationError("give --rates above 0 and --batch from 1 to 1000") }
        progress("== sensor samples: one agent, stream of 6 channels in messages of \(batch), \(fmt(seconds)) s per rate")
        let bed = try SensorBenchFleet()
        defer { bed.stop() }
        let baseline = bed.agentCPUPercent(over: seconds) { _ in }
        progress(String(format: "baseline (nothing sent): agent CPU %.2f %%", baseline))
        print("samples/s   sent      received  lost     refused  unsent  agent CPU   vs baseline   CPU µs per 1000 samples")
        var clean: Double = 0
        for rate in steps {
            let before = bed.counters()
            bed.tally.readings.store(0, ordering: .relaxed)
            var sent = 0
            let cpu = try bed.agentCPUPercent(over: seconds) { deadline in sent = try bed.send(rate: rate, batch: batch, until: deadline) }
            Thread.sleep(forTimeInterval: 1.5)  // the last batches reach the subscriber, the status its counters
            let received = bed.tally.readings.load(ordering: .relaxed)
            let after = bed.counters()
            let lost = sent - received
            if lost == 0, after.refused == before.refused, after.unsent == before.unsent { clean = max(clean, rate) }
            let perThousand = Double(sent) > 0 ? (cpu - baseline) / 100 * seconds * 1e6 / (Double(sent) / 1000) : 0
            print(
                String(
                    format: "%9.0f   %-8d  %-8d  %-7d  %-7d  %-6d  %6.2f %%    %+6.2f %%      %.1f",
                    rate, sent, received, lost, after.refused - before.refused, after.unsent - before.unsent, cpu, cpu - baseline,
                    perThousand))
        }
        progress(
            clean > 0
                ? "highest rate delivered without loss: \(Int(clean)) samples/s (\(fmt(clean / 200)) IMUs at 200 Hz); ratio against 200 Hz: \(fmt(clean / 200))"
                : "no rate was delivered without loss")
    }
}

/// A coordinator and one agent with a sensor stream, a PUSH socket on its sensor endpoint and
/// a telemetry subscriber counting what arrives.
final class SensorBenchFleet: @unchecked Sendable {
    let fleet: LocalFleet
    let client: OperatorClient
    let agent: FleetChild
    let deviceID: String
    /// What the listening thread counts and the benchmark reads.
    final class Tally: Sendable {
        let readings = Atomic<Int>(0)
        let listening = Atomic<Bool>(true)
        let latest = Mutex<Capfleet_V1_DeviceStatus?>(nil)
        let stopped = DispatchSemaphore(value: 0)
    }

    let tally = Tally()
    private let context = ZMQContext()
    private let push: ZMQSocket

    init() throws {
        fleet = try LocalFleet(
            directory: FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-sensor-bench-\(getpid())").path,
            ports: try FleetPorts.free(record: false, metrics: false), output: .standardError)
        let credential = try fleet.operatorCredential(for: "bench", role: "admin")
        try fleet.startCoordinator(arguments: ["--log-level", "error"])
        agent = try fleet.startAgent(
            "sensors",
            arguments: [
                "--synthetic", "1", "--no-discover", "--synthetic-format", "320x240:YUYV", "--fps", "15", "--sensor-stream", "bench",
                "--log-level", "error",
            ])
        client = try OperatorClient(address: fleet.operatorAddress, credential: credential)
        var found: String?
        for _ in 0..<100 where found == nil {
            found = try? client.call(.listDevices(.init())).reply.devices.first { $0.kind == .sensor }?.deviceID
            if found == nil { Thread.sleep(forTimeInterval: 0.1) }
        }
        guard let found else { throw BenchFailure("the agent's sensor stream never registered:\n\(fleet.logTails())") }
        deviceID = found
        try client.grantTestPatternConsent(found)
        push = try ZMQSocket(context: context, type: .push)
        try push.set([.sendQueue(messages: 100_000)])
        try push.connect("ipc://" + fleet.directory + "/sensors/sensors.sock")
        let subscriber = try ZMQSocket(context: context, type: .sub)
        try subscriber.makeCurveClient(serverKey: credential.coordinatorKey, keys: credential.keys)
        try subscriber.set([.receiveQueue(messages: 100_000)])
        try subscriber.subscribe(TelemetryTopic.dataPrefix)
        try subscriber.subscribe(TelemetryTopic.device(found))
        try subscriber.connect("tcp://127.0.0.1:\(fleet.ports.telemetryPort)")
        // The subscription is read on a thread of its own (which owns the socket from here),
        // so no batch waits behind the sender.
        let (owned, tally) = (OwnedSocket(subscriber), tally)
        Thread.detachNewThread {
            let subscriber = owned.socket
            defer {
                subscriber.close()
                tally.stopped.signal()
            }
            while tally.listening.load(ordering: .relaxed) {
                guard subscriber.waitForInput(milliseconds: 100),
                    let (parts, _) = try? subscriber.receiveMultipart(dontWait: true, maxParts: 2), parts.count == 2
                else { continue }
                if parts[0].array.starts(with: Array(TelemetryTopic.dataPrefix.utf8)) {
                    let count = (try? Capfleet_V1_SensorData(serializedBytes: parts[1].array))?.readings.count ?? 0
                    tally.readings.add(count, ordering: .relaxed)
                } else if let status = try? Capfleet_V1_DeviceStatus(serializedBytes: parts[1].array) {
                    tally.latest.withLock { $0 = status }
                }
            }
        }
        Thread.sleep(forTimeInterval: 2)  // consent reaches the agent; the subscription settles
    }

    func stop() {
        tally.listening.store(false, ordering: .relaxed)
        tally.stopped.wait()
        push.close()
        fleet.remove()
    }

    func counters() -> (refused: Int, unsent: Int) {
        tally.latest.withLock { status in (Int(status?.samplesRefused ?? 0), Int(status?.samplesUnsent ?? 0)) }
    }

    /// The agent's CPU over `seconds` while `work` runs until the deadline it is given.
    func agentCPUPercent(over seconds: Double, _ work: (UInt64) throws -> Void) rethrows -> Double {
        let pid = agent.processIdentifier
        let start = MonotonicTime.now()
        let startCPU = TelemetryBenchFleet.cpuNanoseconds(pid: pid)
        try work(start + UInt64(seconds * 1e9))
        let now = MonotonicTime.now()
        if now < start + UInt64(seconds * 1e9) { Thread.sleep(forTimeInterval: Double(start + UInt64(seconds * 1e9) - now) / 1e9) }
        let elapsed = Double(MonotonicTime.now() - start) / 1e9
        return Double(TelemetryBenchFleet.cpuNanoseconds(pid: pid) &- startCPU) / 1e9 / elapsed * 100
    }

    /// Sends `rate` samples a second in messages of `batch` until `deadline`; how many went.
    func send(rate: Double, batch: Int, until deadline: UInt64) throws -> Int {
        let interval = UInt64(Double(batch) / rate * 1e9)
        var next = MonotonicTime.now()
        var sent = 0
        var last: UInt64 = 0
        var message = Capfleet_V1_SensorSamples()
        message.stream = "bench"
        message.channels = ["ax", "ay", "az", "gx", "gy", "gz"]
        while next < deadline {
            let now = MonotonicTime.now()
            if next > now { Thread.sleep(forTimeInterval: Double(next - now) / 1e9) }
            // The batch's samples spread from the previous batch's last to now, each later
            // than the one before (a sender behind its schedule sends batches back to back).
            let stamp = MonotonicTime.now()
            let from = last == 0 ? stamp - interval : last
            message.samples = (0..<batch).map { index in
                .with {
                    $0.monotonicNs = from + (stamp - from) * UInt64(index + 1) / UInt64(batch)
                    $0.values = [0.01, 0, 9.81, 0.02, 0, 0]
                }
            }
            last = stamp
            _ = try push.send(try message.serializedBytes() as [UInt8])
            sent += batch
            next += interval
        }
        return sent
    }
}

/// A socket handed to the one thread that uses it from then on.
private struct OwnedSocket: @unchecked Sendable {
    let socket: ZMQSocket
    init(_ socket: ZMQSocket) { self.socket = socket }
}
