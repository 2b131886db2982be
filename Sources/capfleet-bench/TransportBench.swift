import ArgumentParser
import FleetAgent
import FleetBus
import FleetCapture
import FleetClient
import FleetCoordinator
import FleetCore
import FleetProtocol
import FleetSystem
import FleetTestSupport
import Foundation
import Logging
import Synchronization

/// Frames per second and MB/s from the agent's publish path into the coordinator's ingest
/// path over tcp on 127.0.0.1, against a libzmq PUSH/PULL zero-copy baseline with the same
/// frame size and the same CURVE encryption, measured in the same run (and the same without
/// CURVE, to show what encryption costs). Prints figures; asserts nothing.
struct TransportBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transport", abstract: "Agent publish path → coordinator ingest path vs a plain libzmq PUSH/PULL baseline.")
    @Option(help: "Seconds per measurement.") var seconds: Double = 5
    @Option(help: "Baseline and fleet path alternate in this many slices, so drifting load on a shared machine hits both alike.")
    var rounds: Int = 3
    @Option(help: "Seconds between resident-memory samples of the long run.") var memoryEvery: Double = 5

    struct Case {
        let name: String
        let pixelFormat: PixelFormat
        let width: Int
        let height: Int
        var bytes: Int { pixelFormat.frameByteCount(width: width, height: height)! }
    }

    func run() throws {
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        let cases = [
            Case(name: "1920x1080 YUYV", pixelFormat: .yuyv, width: 1920, height: 1080),
            Case(name: "3840x2160 NV12", pixelFormat: .nv12, width: 3840, height: 2160),
        ]
        print(
            "capfleet-bench transport: \(seconds) s per measurement, tcp on 127.0.0.1, libzmq \(ZMQContext.libraryVersion); both sides CURVE-encrypted, as the fleet always is"
        )
        for benchCase in cases {
            var baseline = Result(), fleet = Result(), plain = Result()
            var ratios: [Double] = []
            let slice = seconds / Double(max(rounds, 1))
            for _ in 0..<max(rounds, 1) {
                plain.add(try Self.baseline(benchCase, seconds: slice / 2, curve: false))
                let baselineSlice = try Self.baseline(benchCase, seconds: slice, curve: true)
                let fleetSlice = try Self.fleetPath(benchCase, seconds: slice, memoryEvery: memoryEvery)
                ratios.append(baselineSlice.framesPerSecond > 0 ? fleetSlice.framesPerSecond / baselineSlice.framesPerSecond : 0)
                baseline.add(baselineSlice)
                fleet.add(fleetSlice)
            }
            let process = try Self.coordinatorProcess(benchCase, seconds: seconds, memoryEvery: memoryEvery)
            let ratio = baseline.framesPerSecond > 0 ? fleet.framesPerSecond / baseline.framesPerSecond : 0
            print(
                """
                \(benchCase.name) (\(benchCase.bytes) bytes/frame)
                  libzmq PUSH/PULL, no CURVE    \(fmt(plain.framesPerSecond)) fps  \(fmt(plain.megabytesPerSecond)) MB/s  (what encryption costs: CURVE baseline is \(String(format: "%.2f", plain.framesPerSecond > 0 ? baseline.framesPerSecond / plain.framesPerSecond : 0)) of it)
                  baseline PUSH/PULL CURVE      \(fmt(baseline.framesPerSecond)) fps  \(fmt(baseline.megabytesPerSecond)) MB/s
                  agent → coordinator ingest    \(fmt(fleet.framesPerSecond)) fps  \(fmt(fleet.megabytesPerSecond)) MB/s
                  ratio to baseline             \(String(format: "%.3f", ratio)) (target ≥ 0.9; per slice \(ratios.map { String(format: "%.2f", $0) }.joined(separator: ", ")))
                  capture→ingest latency        p50 \(fmt(fleet.latencyP50Milliseconds)) ms  p99 \(fmt(fleet.latencyP99Milliseconds)) ms
                  bench process RSS (MiB)       \(fleet.residentMegabytes.map { fmt($0) }.joined(separator: " → "))
                  into a real coordinator process \(fmt(process.framesPerSecond)) fps  \(fmt(process.megabytesPerSecond)) MB/s
                  coordinator RSS (MiB)         \(process.residentMegabytes.map { fmt($0) }.joined(separator: " → "))
                """)
            fflush(nil)
        }
    }

    struct Result {
        var frames: Double = 0
        var bytes: Double = 0
        var seconds: Double = 0
        /// Capture-to-ingest latencies, nanoseconds.
        var latencies: [UInt64] = []
        var residentMegabytes: [Double] = []

        var framesPerSecond: Double { seconds > 0 ? frames / seconds : 0 }
        var megabytesPerSecond: Double { seconds > 0 ? bytes / seconds / 1e6 : 0 }
        var latencyP50Milliseconds: Double { percentile(0.5) }
        var latencyP99Milliseconds: Double { percentile(0.99) }

        func percentile(_ p: Double) -> Double {
            let sorted = latencies.sorted()
            return sorted.isEmpty ? 0 : Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1e6
        }

        mutating func add(_ other: Result) {
            frames += other.frames
            bytes += other.bytes
            seconds += other.seconds
            latencies += other.latencies
            residentMegabytes += other.residentMegabytes
        }
    }

    /// Plain libzmq: one thread sends pre-filled frames zero-copy as fast as the socket
    /// takes them, the other receives and counts.
    static func baseline(_ benchCase: Case, seconds: Double, curve: Bool) throws -> Result {
        let context = ZMQContext()
        let pull = try ZMQSocket(context: context, type: .pull)
        try pull.set([.receiveQueue(messages: 8)])
        let server = try CurveKeyPair.generate(), client = try CurveKeyPair.generate()
        if curve { try pull.makeCurveServer(keys: server, domain: "bench") }
        try pull.bind("tcp://127.0.0.1:*")
        let endpoint = try pull.lastEndpoint()
        let pool = FrameBufferPool(bufferSize: benchCase.bytes, capacity: 6)  // as many frames in flight as the fleet path allows
        let stop = Atomic<Bool>(false)
        // Not joined: a PUSH without its peer may block in send for ever; the process ends it.
        _ = OwnedThread(name: "cf-bench-send") {
            guard let push = try? ZMQSocket(context: context, type: .push) else { return }
            try? push.set([.sendQueue(messages: 2)])
            if curve { try? push.makeCurveClient(serverKey: server.publicKey, keys: client) }
            try? push.connect(endpoint)
            while !stop.load(ordering: .relaxed) {
                guard let buffer = pool.take(waitingUpTo: .now() + .milliseconds(100)) else { continue }
                _ = try? push.sendZeroCopy(buffer.storage, count: benchCase.bytes, owner: buffer)
            }
            push.close()
        }
        var frames = 0
        var bytes = 0
        let start = MonotonicTime.now()
        let end = start + UInt64(seconds * 1e9)
        while MonotonicTime.now() < end {
            guard pull.waitForInput(milliseconds: 100) else { continue }
            while let message = try pull.receiveMultipart(dontWait: true) {
                frames += 1
                bytes += message.parts.reduce(0) { $0 + $1.count }
            }
        }
        let elapsed = Double(MonotonicTime.now() - start) / 1e9
        stop.store(true, ordering: .relaxed)
        pull.close()
        return Result(frames: Double(frames), bytes: Double(bytes), seconds: elapsed)
    }

    /// The real thing: `FramePublisher` (the agent's live path, header and zero-copy payload)
    /// into `FrameIngest` (the coordinator's validated ingest). The producer waits for a
    /// free buffer or queue slot instead of dropping, so the figure is throughput.
    static func fleetPath(_ benchCase: Case, seconds: Double, memoryEvery: Double) throws -> Result {
        let logger = Logger(label: "bench")
        let context = ZMQContext()
        let latencies = Mutex<[UInt64]>([])
        // The coordinator's way in: CURVE, a ZAP handler naming the node, each frame's sender checked.
        let server = try CurveKeyPair.generate(), node = try CurveKeyPair.generate()
        let userID = Principal.node(id: "node-bench", key: node.publicKey.z85).userID
        let zap = try ZAPHandler(context: context) { request in
            request.clientKey == node.publicKey ? .allow(userID: userID) : .deny(reason: "unknown key")
        }
        defer { zap.stop() }
        let ingest = try FrameIngest(
            context: context, bind: "tcp://127.0.0.1:*", rejections: RejectionCounter(logger: logger),
            security: CurveServerSecurity(keys: server, domain: "ingest") { _, _ in },
            admits: { sender, nodeID, _, _ in
                if case let .node(id, _)? = Principal(userID: sender) { id == nodeID } else { false }
            }
        ) { header in
            let now = MonotonicTime.now()
            latencies.withLock { $0.append(now - header.captureMonotonicNs) }
        }
        ingest.admit(deviceID: "bench-1", nodeID: "node-bench")
        let publisher = try FramePublisher(context: context, capacity: 4, coordinatorKey: server.publicKey, keys: node, logger: logger)
        publisher.connect(to: ingest.boundEndpoint)
        let stop = Atomic<Bool>(false)
        _ = OwnedThread(name: "cf-bench-frames") { produce(benchCase, publisher: publisher, stop: stop) }
        // Let the connection settle before measuring.
        Thread.sleep(forTimeInterval: 0.5)
        let startState = ingest.state(of: "bench-1")
        latencies.withLock { $0.removeAll() }
        let start = MonotonicTime.now()
        var resident = [residentMegabytes()]
        var nextSample = start + UInt64(memoryEvery * 1e9)
        let end = start + UInt64(seconds * 1e9)
        while MonotonicTime.now() < end {
            Thread.sleep(forTimeInterval: 0.05)
            if MonotonicTime.now() >= nextSample {
                resident.append(residentMegabytes())
                nextSample += UInt64(memoryEvery * 1e9)
            }
        }
        let endState = ingest.state(of: "bench-1")
        let elapsed = Double(MonotonicTime.now() - start) / 1e9
        resident.append(residentMegabytes())
        stop.store(true, ordering: .relaxed)
        Thread.sleep(forTimeInterval: 0.1)
        publisher.stop()
        ingest.stop()
        let frames = Double((endState?.framesReceived ?? 0) - (startState?.framesReceived ?? 0))
        let bytes = Double((endState?.bytesReceived ?? 0) - (startState?.bytesReceived ?? 0))
        return Result(frames: frames, bytes: bytes, seconds: elapsed, latencies: latencies.withLock { $0 }, residentMegabytes: resident)
    }

    /// The same publish path into a `capfleet coordinator` child process, registered with a
    /// real HELLO, to watch the coordinator's own resident memory over the run.
    static func coordinatorProcess(_ benchCase: Case, seconds: Double, memoryEvery: Double) throws -> Result {
        let fleet = try LocalFleet(
            directory: FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-bench-\(getpid())").path,
            ports: try FleetPorts.free(record: false, metrics: false), output: .standardError)
        defer { fleet.remove() }
        let ports = fleet.ports
        let credential = try fleet.operatorCredential(for: "bench", role: "admin")
        let token = try EnrollmentToken(text: try fleet.enrollmentToken(name: "bench"))
        let child = try fleet.startCoordinator(arguments: ["--log-level", "error"])

        let context = ZMQContext()
        // Enroll as an agent does: the token's key pair presents the node's own key, once.
        let node = try CurveKeyPair.generate()
        let enrolling = try ZMQSocket(context: context, type: .dealer)
        try enrolling.makeCurveClient(serverKey: token.coordinatorKey, keys: token.keys)
        try enrolling.connect("tcp://127.0.0.1:\(ports.controlPort)")
        try enrolling.send(
            try Capfleet_V1_AgentMessage.with {
                $0.enroll = .with {
                    $0.nodePublicKey = Data(node.publicKey.bytes)
                    $0.nodeID = "node-bench"
                }
            }.serializedBytes() as [UInt8])
        guard enrolling.waitForInput(milliseconds: 10_000) else { throw BenchFailure("the benchmark's coordinator did not answer Enroll") }
        enrolling.close()
        let control = try ZMQSocket(context: context, type: .dealer)
        try control.makeCurveClient(serverKey: token.coordinatorKey, keys: node)
        try control.connect("tcp://127.0.0.1:\(ports.controlPort)")
        let format = VideoFormat(
            pixelFormat: benchCase.pixelFormat, width: benchCase.width, height: benchCase.height,
            frameRateRanges: [FrameRateRange(min: 1, max: 1000)])
        let hello: [UInt8] = try Capfleet_V1_AgentMessage.with {
            $0.hello = .with {
                $0.protocolVersion = .current
                $0.nodeID = "node-bench"
                $0.nodeName = "bench"
                $0.devices = [
                    .with {
                        $0.deviceID = "bench-1"
                        $0.name = "bench"
                        $0.kind = .synthetic
                        $0.formats = [format.wire]
                    }
                ]
            }
        }.serializedBytes()
        var welcomed = false
        for _ in 0..<50 where !welcomed {
            try control.send(hello, dontWait: true)
            welcomed = control.waitForInput(milliseconds: 200)
        }
        guard welcomed else { throw BenchFailure("the benchmark's coordinator did not answer HELLO") }

        let logger = Logger(label: "bench")
        let publisher = try FramePublisher(context: context, capacity: 4, coordinatorKey: token.coordinatorKey, keys: node, logger: logger)
        publisher.connect(to: "tcp://127.0.0.1:\(ports.ingestPort)")
        let stop = Atomic<Bool>(false)
        _ = OwnedThread(name: "cf-bench-frames") { produce(benchCase, publisher: publisher, stop: stop) }
        defer { stop.store(true, ordering: .relaxed); Thread.sleep(forTimeInterval: 0.1); publisher.stop() }

        let client = try OperatorClient(address: fleet.operatorAddress, credential: credential)
        func counted() throws -> (frames: UInt64, bytes: UInt64) {
            let stats = try client.call(.getFleetStats(.init())).reply.deviceStats.first { $0.deviceID == "bench-1" }
            return (stats?.framesReceived ?? 0, stats?.bytesReceived ?? 0)
        }
        Thread.sleep(forTimeInterval: 1.5)
        let first = try counted()
        let start = MonotonicTime.now()
        var resident = [residentMegabytes(pid: child.processIdentifier)]
        let end = start + UInt64(seconds * 1e9)
        var nextSample = start + UInt64(memoryEvery * 1e9)
        while MonotonicTime.now() < end {
            Thread.sleep(forTimeInterval: 0.05)
            if MonotonicTime.now() >= nextSample {
                resident.append(residentMegabytes(pid: child.processIdentifier))
                nextSample += UInt64(memoryEvery * 1e9)
            }
        }
        let last = try counted()
        let elapsed = Double(MonotonicTime.now() - start) / 1e9
        resident.append(residentMegabytes(pid: child.processIdentifier))
        return Result(
            frames: Double(last.frames - first.frames), bytes: Double(last.bytes - first.bytes), seconds: elapsed,
            residentMegabytes: resident)
    }

    /// Submits pre-filled frames as fast as the publisher's queue and buffer pool allow:
    /// waiting, not dropping, so the figure is throughput.
    static func produce(_ benchCase: Case, publisher: FramePublisher, stop: borrowing Atomic<Bool>) {
        let statistics = DeviceStatistics(deviceID: "bench-1", outOfBuffers: { 0 })
        let layout = FrameLayout(
            pixelFormat: benchCase.pixelFormat, width: benchCase.width, height: benchCase.height,
            bytesPerLine: benchCase.pixelFormat.bytesPerLine(width: benchCase.width))
        let pool = FrameBufferPool(bufferSize: benchCase.bytes, capacity: publisher.queueCapacity + 2)
        var sequence: UInt64 = 0
        while !stop.load(ordering: .relaxed) {
            // Block on the pool (buffers come back as libzmq sends them) instead of spinning:
            // on two cores a busy producer steals the time the sockets need.
            guard let buffer = pool.take(waitingUpTo: .now() + .milliseconds(100)) else { continue }
            while publisher.queueDepth >= publisher.queueCapacity && !stop.load(ordering: .relaxed) { usleep(200) }
            sequence += 1
            let frame = CapturedFrame(
                buffer: buffer, byteCount: benchCase.bytes, sequence: sequence,
                captureMonotonicNanoseconds: MonotonicTime.now(), layout: layout)
            let header = Capfleet_V1_FrameHeader(capturing: frame, nodeID: "node-bench", deviceID: "bench-1")
            publisher.submit(frame, header: header, statistics: statistics)
        }
    }

    /// VmRSS of a process (this one by default), in MiB.
    static func residentMegabytes(pid: Int32? = nil) -> Double {
        guard let status = try? String(contentsOfFile: "/proc/\(pid.map(String.init) ?? "self")/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kilobytes / 1024
    }
}
