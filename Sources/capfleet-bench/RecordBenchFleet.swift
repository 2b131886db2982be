import FleetClient
import FleetCore
import FleetProtocol
import FleetTestSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A coordinator child process and agents for the recording benchmark.
final class RecordBenchFleet {
    struct Step {
        var takeID: String
        var frames: Int
        var dropped: Int
        var framesPerSecondPerStream: Double
        var megabytesPerSecond: Double
        var cpuPercent: Double
        /// The coordinator's own share of `cpuPercent`.
        var coordinatorCPUPercent: Double
        /// The coordinator's CPU just before the take, with the same cameras running and
        /// nothing recorded (heartbeats, status, clock probes, previews): the baseline that
        /// `coordinatorCPUPercent` less it is the recording's own cost.
        var coordinatorIdleCPUPercent: Double
        var coordinatorResidentMegabytes: Double
        var segmentSizes: [Int64]
        /// Seconds from the stop to every part stored: the backlog the coordinator had.
        var backlogSeconds: Double
    }

    let fleet: LocalFleet
    /// Where takes are written: the coordinator, or each agent.
    let store: Capfleet_V1_RecordStore
    let recordings: String
    let credential: OperatorCredential
    private let coordinator: FleetChild
    private var agents: [FleetChild] = []

    /// Next to the build, on the disk the fleet would record to; not /tmp, which may be memory.
    static func benchDirectory(suffix: String) -> String {
        FileManager.default.currentDirectoryPath + "/.build/bench/record-\(getpid())-\(suffix)"
    }

    init(store: Capfleet_V1_RecordStore) throws {
        self.store = store
        fleet = try LocalFleet(
            directory: Self.benchDirectory(suffix: store == .agent ? "agents" : "fleet"),
            ports: try FleetPorts.free(record: false, metrics: false), output: .standardError)
        recordings = fleet.directory + "/recordings"
        credential = try fleet.operatorCredential(for: "bench", role: "admin")
        coordinator = try fleet.startCoordinator(
            arguments: ["--log-level", "error"],
            environment: ["CAPFLEET_RECORDINGS_DIR": recordings, "CAPFLEET_SEGMENT_SECONDS": "10"])
    }

    /// Agents first, then the coordinator, then the files.
    func stop() { fleet.remove() }

    private func client(timeout: Double = 5) throws -> OperatorClient {
        try OperatorClient(address: fleet.operatorAddress, credential: credential, timeout: timeout)
    }

    private func call(_ body: Capfleet_V1_OperatorRequest.OneOf_Body, timeout: Double = 5) throws -> Capfleet_V1_OperatorReply {
        let reply = try client(timeout: timeout).call(body).reply
        guard reply.status.code == .ok else { throw BenchFailure("the coordinator refused: \(reply.status.reason)") }
        return reply
    }

    /// Starts agents (one synthetic 1080p30 camera each) until there are `count`, every one
    /// registered, its clock locked and its consent granted.
    func ensureAgents(_ count: Int) throws {
        while agents.count < count {
            // Collect unthrottled: the benchmark measures the transfer, not the default rate limit.
            agents.append(
                try fleet.startAgent(
                    "rec\(agents.count + 1)",
                    arguments: [
                        "--synthetic", "1", "--no-discover", "--synthetic-format", "1920x1080:YUYV", "--fps", "30", "--no-pressure", "--log-level",
                        "error",
                    ], environment: ["CAPFLEET_COLLECT_RATE_MB": "0"]))
        }
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            let nodes = try call(.listNodes(.init())).nodes
            if nodes.filter(\.online).count >= count, nodes.filter({ $0.online && $0.clock.sync == .locked }).count >= count { break }
            Thread.sleep(forTimeInterval: 0.5)
        }
        for device in try call(.listDevices(.init())).devices where device.consent != .authorized {
            _ = try call(
                .changeConsent(
                    .with {
                        $0.deviceID = device.deviceID
                        $0.action = .grant
                        $0.reason = "recording benchmark"
                    }))
        }
    }

    /// One take of every online camera for `seconds`, stored as `encoding` says, after
    /// `baselineSeconds` of the same cameras not recording.
    func record(seconds: Double, baselineSeconds: Double = 5, encoding: TakeEncoding = .raw) throws -> Step {
        let devices = try call(.listDevices(.init())).devices.filter(\.online).map(\.deviceID)
        let pids = [coordinator.processIdentifier] + agents.map(\.processIdentifier)
        var idle = 0.0
        if baselineSeconds > 0 {
            let idleBefore = TelemetryBenchFleet.cpuNanoseconds(pid: coordinator.processIdentifier)
            let idleWallBefore = MonotonicTime.now()
            Thread.sleep(forTimeInterval: baselineSeconds)
            idle =
                Double(TelemetryBenchFleet.cpuNanoseconds(pid: coordinator.processIdentifier) &- idleBefore) / 1e9
                / (Double(MonotonicTime.now() - idleWallBefore) / 1e9) * 100
        }
        let take = try call(
            .startRecording(
                .with {
                    $0.deviceIds = devices
                    $0.name = "bench \(devices.count)"
                    $0.store = store
                    $0.encoding = encoding.wire
                }), timeout: 30
        ).takes[0]
        // From the take's start instant (a second ahead) to its stop.
        Thread.sleep(forTimeInterval: 1)
        let cpuBefore = pids.map { TelemetryBenchFleet.cpuNanoseconds(pid: $0) }
        let wallBefore = MonotonicTime.now()
        Thread.sleep(forTimeInterval: seconds)
        let elapsed = Double(MonotonicTime.now() - wallBefore) / 1e9
        let used = zip(pids, cpuBefore).map { Double(TelemetryBenchFleet.cpuNanoseconds(pid: $0.0) &- $0.1) / 1e9 / elapsed * 100 }
        let cpu = used.reduce(0, +)
        let resident = TransportBench.residentMegabytes(pid: coordinator.processIdentifier)
        let stopAsked = MonotonicTime.now()
        try stopAndWait(take.id)
        let backlog = Double(MonotonicTime.now() - stopAsked) / 1e9
        let shown = try call(.getRecording(.with { $0.takeID = take.id })).takes[0]
        let frames = shown.devices.reduce(0) { $0 + Int($1.frames) }
        let dropped = shown.devices.reduce(0) { $0 + Int($1.drops.late + $1.drops.outOfBuffers + $1.drops.discontinuity + $1.drops.encoderLate) }
        let spans = shown.devices.map { Double($0.lastFleetNs &- $0.firstFleetNs) / 1e9 }
        let span = spans.max() ?? seconds
        let perStream = shown.devices.map { Double($0.frames) / max(Double($0.lastFleetNs &- $0.firstFleetNs) / 1e9, 0.001) }
        let bytes = shown.segments.reduce(Int64(0)) { $0 + Int64($1.sizeBytes) }
        let incomplete = shown.devices.contains { $0.state != "stopped" }
        return Step(
            takeID: take.id, frames: frames, dropped: dropped + (incomplete ? 1 : 0),
            framesPerSecondPerStream: perStream.min() ?? 0, megabytesPerSecond: Double(bytes) / 1e6 / max(span, 0.001),
            cpuPercent: cpu, coordinatorCPUPercent: used[0], coordinatorIdleCPUPercent: idle, coordinatorResidentMegabytes: resident,
            segmentSizes: shown.segments.map { Int64($0.sizeBytes) },
            backlogSeconds: backlog)
    }

    /// Stops a take and waits until every part is stored (the take is no longer recording).
    func stopAndWait(_ takeID: String) throws {
        _ = try call(
            .stopRecording(
                .with {
                    $0.takeID = takeID
                    $0.waitMs = 60_000
                }), timeout: 70)
        let deadline = Date().addingTimeInterval(300)
        while try call(.getRecording(.with { $0.takeID = takeID })).takes[0].state == "recording" {
            guard Date() < deadline else { throw BenchFailure("take \(takeID) was not stored 5 minutes after its stop") }
            Thread.sleep(forTimeInterval: 0.5)
        }
    }

    /// Collects an agent-held take to the coordinator; returns MB/s and the bytes copied.
    func collect(_ takeID: String) throws -> (megabytesPerSecond: Double, bytes: UInt64) {
        let session = try OperatorSession(address: fleet.operatorAddress, credential: credential, timeout: 30)
        let start = MonotonicTime.now()
        let info = try session.collectTake(takeID)
        let seconds = Double(MonotonicTime.now() - start) / 1e9
        return (Double(info.collectedBytes) / 1e6 / max(seconds, 0.001), info.collectedBytes)
    }

    func delete(_ takeID: String) throws {
        _ = try call(.deleteRecording(.with { $0.takeID = takeID }), timeout: 60)
    }

    /// MB/s of writing files of these sizes, 1 MiB at a time, into the recordings directory.
    func plainWrite(sizes: [Int64]) throws -> Double {
        try Self.plainWrite(sizes: sizes, in: recordings + "/plain")
    }

    /// MB/s of writing files of these sizes, 1 MiB at a time, into `folder` (removed after).
    /// `durable`: each file is synced before it is closed, and the time counts it (to the disk,
    /// not the page cache).
    static func plainWrite(sizes: [Int64], in folder: String, durable: Bool = false) throws -> Double {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let chunk = UnsafeMutableRawPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { chunk.deallocate() }
        memset(chunk, 0x80, 1 << 20)
        if durable { sync() }
        let start = MonotonicTime.now()
        var total: Int64 = 0
        for (index, size) in sizes.enumerated() {
            let fd = open(folder + "/plain-\(index).bin", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw BenchFailure("cannot create a file in \(folder): \(String(cString: strerror(errno)))") }
            var left = size
            while left > 0 {
                let n = write(fd, chunk, Int(min(left, 1 << 20)))
                guard n > 0 else {
                    close(fd)
                    throw BenchFailure("cannot write in \(folder): \(String(cString: strerror(errno)))")
                }
                left -= Int64(n)
            }
            if durable, fsync(fd) != 0 {
                close(fd)
                throw BenchFailure("cannot sync a file in \(folder): \(String(cString: strerror(errno)))")
            }
            close(fd)
            total += size
        }
        return Double(total) / 1e6 / (Double(MonotonicTime.now() - start) / 1e9)
    }

    /// Coordinator RSS once a second over `seconds` of back-to-back takes.
    func sustained(seconds: Double, takeSeconds: Double) throws -> [(seconds: Double, megabytes: Double)] {
        var samples: [(Double, Double)] = []
        let start = MonotonicTime.now()
        func elapsed() -> Double { Double(MonotonicTime.now() - start) / 1e9 }
        while elapsed() < seconds {
            let devices = try call(.listDevices(.init())).devices.filter(\.online).map(\.deviceID)
            let take = try call(
                .startRecording(
                    .with {
                        $0.deviceIds = devices
                        $0.name = "sustained"
                        $0.store = store
                    }), timeout: 30
            ).takes[0]
            let takeEnd = min(elapsed() + takeSeconds, seconds)
            while elapsed() < takeEnd {
                samples.append((elapsed(), TransportBench.residentMegabytes(pid: coordinator.processIdentifier)))
                Thread.sleep(forTimeInterval: 1)
            }
            try stopAndWait(take.id)
            try delete(take.id)
        }
        return samples
    }
}
