import ArgumentParser
import FleetBus
import FleetClient
import FleetCore
import FleetProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Sustained recording: how many 1920x1080 YUYV 30 fps synthetic streams this machine records
/// without losing a frame, the MB/s written against a plain sequential write of the same files'
/// sizes to the same disk (measured in the same run), CPU per stream, and whether the
/// coordinator's memory stays flat over consecutive takes. Real processes: a `capfleet
/// coordinator` child and one `capfleet agent` child per stream, all on this machine.
struct RecordBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record", abstract: "Streams recorded without drops at 1080p30, MB/s against a plain write, CPU per stream, coordinator memory over time.")

    @Option(help: "Seconds recorded per step of the ramp.") var seconds: Double = 10
    @Option(help: "Most streams to try.") var maxStreams: Int = 6
    @Option(help: "Seconds of the sustained run that watches the coordinator's memory (consecutive 30 s takes, each deleted after).")
    var sustainedSeconds: Double = 60
    @Option(help: "Frames of 1080p YUYV fed to the recording writer alone (the writer-against-disk stage).")
    var muxerFrames: Int = 450

    func run() throws {
        // The writer alone, first, on an idle machine: what recording costs against the disk when
        // the cameras and the network are not the limit. Two plain writes of the same sizes
        // follow, averaged.
        print("== the recording writer alone against the disk: \(muxerFrames) frames of 1920x1080 YUYV into DeviceTakeRecorder (Matroska via libavformat, SQLite index, SHA-256 on its own thread), as fast as it takes them, synced to disk; then a plain write of the same files' sizes, synced")
        let muxerDirectory = RecordBenchFleet.benchDirectory(suffix: "muxer")
        let muxer = try RecordMuxerBench.run(directory: muxerDirectory + "/recordings", frames: muxerFrames, segmentSeconds: 5)
        let plainBefore = try RecordBenchFleet.plainWrite(sizes: muxer.segmentSizes, in: muxerDirectory + "/plain", durable: true)
        let plainAfter = try RecordBenchFleet.plainWrite(sizes: muxer.segmentSizes, in: muxerDirectory + "/plain", durable: true)
        let plainMean = (plainBefore + plainAfter) / 2
        print(String(format: "writer: %d frames, %.0f MB in %d segments in %.2f s to disk: %.1f MB/s (%.1f streams of 1080p30); checksums done %.2f s later, off the writer's thread",
                     muxer.frames, Double(muxer.bytes) / 1e6, muxer.segmentSizes.count, muxer.seconds, muxer.megabytesPerSecond,
                     muxer.megabytesPerSecond / 124.4, muxer.checksumSeconds))
        print(String(format: "plain sequential write of the same %d files, twice: %.1f and %.1f MB/s; writer/plain ratio %.3f (target ≥ 0.8)",
                     muxer.segmentSizes.count, plainBefore, plainAfter, muxer.megabytesPerSecond / plainMean))
        print("  (the writer hands every 8 MiB to writeback as it goes; the plain write leaves it all to its fsync, so a ratio above 1 is the writer streaming to the disk sooner)")

        try? FileManager.default.removeItem(atPath: muxerDirectory)

        let fleet = try RecordBenchFleet()
        defer { fleet.stop() }
        print("\n== recording 1920x1080 YUYV at 30 fps per stream, \(fmt(seconds)) s per step; files in \(fleet.recordings)")
        print("streams  fps/stream  frames  dropped  MB/s written  CPU %/stream  coordinator RSS MiB  stored after stop")
        var best: (streams: Int, row: RecordBenchFleet.Step)?
        for streams in 1...max(1, maxStreams) {
            try fleet.ensureAgents(streams)
            let step = try fleet.record(seconds: seconds)
            print(String(format: "%7d  %10.2f  %6d  %7d  %12.1f  %12.1f  %19.1f  %15.1f s", streams, step.framesPerSecondPerStream, step.frames,
                         step.dropped, step.megabytesPerSecond, step.cpuPercent / Double(streams), step.coordinatorResidentMegabytes,
                         step.backlogSeconds))
            try fleet.delete(step.takeID)
            guard step.dropped == 0, step.framesPerSecondPerStream >= 29 else {
                print("  \(streams) streams lose frames (or fall below 29 fps): this machine holds \(streams - 1)")
                break
            }
            // A coordinator slower than the cameras stores the take only long after its stop (the
            // agents spooled meanwhile): nothing lost, but not sustainable.
            guard step.backlogSeconds < 3 else {
                print(String(format: "  %d streams: nothing lost, but stored %.1f s after the stop (the agents spooled what the coordinator could not take): this machine sustains %d", streams, step.backlogSeconds, streams - 1))
                break
            }
            best = (streams, step)
        }
        guard let best else { throw CLIFailure("not even one stream recorded without drops") }

        // The same bytes, written plainly: one file per segment of the same size, 1 MiB writes,
        // no fsync (the recorder does not sync either), same directory.
        let plain = try fleet.plainWrite(sizes: best.row.segmentSizes)
        let ratio = best.row.megabytesPerSecond / plain
        print(String(format: "most streams without drops: %d; recording wrote %.1f MB/s, a plain sequential write of the same %d files %.1f MB/s: ratio %.3f",
                     best.streams, best.row.megabytesPerSecond, best.row.segmentSizes.count, plain, ratio))
        print(String(format: "  (the recording's rate is the cameras' — %d × 124.4 MB/s —, not the disk's: the ratio says how much of the disk %d streams use; CPU per stream %.1f %% of one core)",
                     best.streams, best.streams, best.row.cpuPercent / Double(best.streams)))

        print("\n== coordinator memory over \(fmt(sustainedSeconds)) s of recording \(best.streams) stream(s) (consecutive 30 s takes, each deleted after)")
        let samples = try fleet.sustained(seconds: sustainedSeconds, takeSeconds: 30)
        guard let first = samples.first, let last = samples.last else { return }
        let peak = samples.map(\.megabytes).max() ?? 0
        let tail = samples.suffix(max(1, samples.count / 2))
        let half = samples.prefix(max(1, samples.count / 2))
        let early = half.map(\.megabytes).reduce(0, +) / Double(half.count)
        let late = tail.map(\.megabytes).reduce(0, +) / Double(tail.count)
        let minutes = (last.seconds - first.seconds) / 60
        print(String(format: "coordinator RSS: first %.1f MiB, last %.1f MiB, peak %.1f MiB; mean of the first half %.1f, second half %.1f MiB (%+.1f MiB over %.1f min)",
                     first.megabytes, last.megabytes, peak, early, late, late - early, minutes))
    }
}

/// A coordinator child process and agents for the recording benchmark.
final class RecordBenchFleet {
    struct Step {
        var takeID: String
        var frames: Int
        var dropped: Int
        var framesPerSecondPerStream: Double
        var megabytesPerSecond: Double
        var cpuPercent: Double
        var coordinatorResidentMegabytes: Double
        var segmentSizes: [Int64]
        /// Seconds from the stop to every part stored: the backlog the coordinator had.
        var backlogSeconds: Double
    }

    let directory: String
    let recordings: String
    let ports: [UInt16]
    let credential: OperatorCredential
    private let coordinator = Process()
    private var agents: [Process] = []
    private let binary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()

    /// Next to the build, on the disk the fleet would record to; not /tmp, which may be memory.
    static func benchDirectory(suffix: String) -> String {
        FileManager.default.currentDirectoryPath + "/.build/bench/record-\(getpid())-\(suffix)"
    }

    init() throws {
        directory = Self.benchDirectory(suffix: "fleet")
        recordings = directory + "/recordings"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        ports = try LoopbackPorts.free(5)
        credential = try BenchAccess.credential(dataDirectory: directory + "/coordinator")
        coordinator.executableURL = binary
        coordinator.arguments = ["coordinator", "--data", directory + "/coordinator", "--log-level", "error"]
        coordinator.environment = ProcessInfo.processInfo.environment.merging([
            "CAPFLEET_BIND": "127.0.0.1", "CAPFLEET_CONTROL_PORT": "\(ports[0])", "CAPFLEET_INGEST_PORT": "\(ports[1])",
            "CAPFLEET_OPERATOR_PORT": "\(ports[2])", "CAPFLEET_TELEMETRY_PORT": "\(ports[3])", "CAPFLEET_CLOCK_PORT": "\(ports[4])",
            "CAPFLEET_RECORD_PORT": "0", "CAPFLEET_METRICS_PORT": "off", "CAPFLEET_RECORDINGS_DIR": recordings,
            "CAPFLEET_SEGMENT_SECONDS": "10",
        ]) { $1 }
        try coordinator.run()
    }

    func stop() {
        for agent in agents where agent.isRunning { agent.terminate(); agent.waitUntilExit() }
        if coordinator.isRunning { coordinator.terminate(); coordinator.waitUntilExit() }
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func client(timeout: Double = 5) throws -> OperatorClient {
        try OperatorClient(address: CoordinatorAddress(host: "127.0.0.1", port: ports[2]), credential: credential, timeout: timeout)
    }

    private func call(_ body: Capfleet_V1_OperatorRequest.OneOf_Body, timeout: Double = 5) throws -> Capfleet_V1_OperatorReply {
        let reply = try client(timeout: timeout).call(body).reply
        guard reply.status.code == .ok else { throw CLIFailure("the coordinator refused: \(reply.status.reason)") }
        return reply
    }

    /// Starts agents (one synthetic 1080p30 camera each) until there are `count`, every one
    /// registered, its clock locked and its consent granted.
    func ensureAgents(_ count: Int) throws {
        while agents.count < count {
            let name = "rec\(agents.count + 1)"
            let agent = Process()
            agent.executableURL = binary
            agent.arguments = ["agent", "--coordinator", "127.0.0.1:\(ports[0])", "--name", name, "--synthetic", "1", "--no-discover",
                               "--synthetic-format", "1920x1080:YUYV", "--fps", "30", "--state-dir", directory + "/" + name,
                               "--no-pressure", "--log-level", "error",
                               "--enroll", try BenchAccess.token(dataDirectory: directory + "/coordinator", name: name)]
            agent.standardOutput = FileHandle.nullDevice
            try agent.run()
            agents.append(agent)
        }
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            let nodes = try call(.listNodes(.init())).nodes
            if nodes.filter(\.online).count >= count, nodes.filter({ $0.online && $0.clock.sync == .locked }).count >= count { break }
            Thread.sleep(forTimeInterval: 0.5)
        }
        for device in try call(.listDevices(.init())).devices where device.consent != .authorized {
            _ = try call(.changeConsent(.with {
                $0.deviceID = device.deviceID
                $0.action = .grant
                $0.reason = "recording benchmark"
            }))
        }
    }

    func record(seconds: Double) throws -> Step {
        let devices = try call(.listDevices(.init())).devices.filter(\.online).map(\.deviceID)
        let pids = [coordinator.processIdentifier] + agents.map(\.processIdentifier)
        let take = try call(.startRecording(.with {
            $0.deviceIds = devices
            $0.name = "bench \(devices.count)"
        }), timeout: 30).takes[0]
        // From the take's start instant (a second ahead) to its stop.
        Thread.sleep(forTimeInterval: 1)
        let cpuBefore = pids.map { TelemetryBenchFleet.cpuNanoseconds(pid: $0) }
        let wallBefore = MonotonicTime.now()
        Thread.sleep(forTimeInterval: seconds)
        let elapsed = Double(MonotonicTime.now() - wallBefore) / 1e9
        let cpu = zip(pids, cpuBefore).reduce(0.0) { $0 + Double(TelemetryBenchFleet.cpuNanoseconds(pid: $1.0) &- $1.1) } / 1e9 / elapsed * 100
        let resident = TransportBench.residentMegabytes(pid: coordinator.processIdentifier)
        let stopAsked = MonotonicTime.now()
        try stopAndWait(take.id)
        let backlog = Double(MonotonicTime.now() - stopAsked) / 1e9
        let shown = try call(.getRecording(.with { $0.takeID = take.id })).takes[0]
        let frames = shown.devices.reduce(0) { $0 + Int($1.frames) }
        let dropped = shown.devices.reduce(0) { $0 + Int($1.drops.late + $1.drops.outOfBuffers + $1.drops.discontinuity) }
        let spans = shown.devices.map { Double($0.lastFleetNs &- $0.firstFleetNs) / 1e9 }
        let span = spans.max() ?? seconds
        let perStream = shown.devices.map { Double($0.frames) / max(Double($0.lastFleetNs &- $0.firstFleetNs) / 1e9, 0.001) }
        let bytes = shown.segments.reduce(Int64(0)) { $0 + Int64($1.sizeBytes) }
        let incomplete = shown.devices.contains { $0.state != "stopped" }
        return Step(takeID: take.id, frames: frames, dropped: dropped + (incomplete ? 1 : 0),
                    framesPerSecondPerStream: perStream.min() ?? 0, megabytesPerSecond: Double(bytes) / 1e6 / max(span, 0.001),
                    cpuPercent: cpu, coordinatorResidentMegabytes: resident, segmentSizes: shown.segments.map { Int64($0.sizeBytes) },
                    backlogSeconds: backlog)
    }

    /// Stops a take and waits until every part is stored (the take is no longer recording).
    func stopAndWait(_ takeID: String) throws {
        _ = try call(.stopRecording(.with {
            $0.takeID = takeID
            $0.waitMs = 60_000
        }), timeout: 70)
        let deadline = Date().addingTimeInterval(300)
        while try call(.getRecording(.with { $0.takeID = takeID })).takes[0].state == "recording" {
            guard Date() < deadline else { throw CLIFailure("take \(takeID) was not stored 5 minutes after its stop") }
            Thread.sleep(forTimeInterval: 0.5)
        }
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
            guard fd >= 0 else { throw CLIFailure("cannot create a file in \(folder): \(String(cString: strerror(errno)))") }
            var left = size
            while left > 0 {
                let n = write(fd, chunk, Int(min(left, 1 << 20)))
                guard n > 0 else {
                    close(fd)
                    throw CLIFailure("cannot write in \(folder): \(String(cString: strerror(errno)))")
                }
                left -= Int64(n)
            }
            if durable, fsync(fd) != 0 {
                close(fd)
                throw CLIFailure("cannot sync a file in \(folder): \(String(cString: strerror(errno)))")
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
            let take = try call(.startRecording(.with {
                $0.deviceIds = devices
                $0.name = "sustained"
            }), timeout: 30).takes[0]
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
