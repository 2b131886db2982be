import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import FleetTestSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Frames and MB/s a GenICam camera gives through an agent, against Aravis's own
/// `arv-camera-test-0.8` on the same camera in the same run (issue "industrial GenICam
/// cameras"; proto-docs/device-model.md, "GenICam cameras"). One agent host in a network
/// namespace with Aravis's fake GigE Vision camera on a link of its own (`netns-fleet.sh up
/// --genicam`): the agent streams it at the format and rate asked, consent granted, for
/// `--seconds`; then the agent is stopped and arv-camera-test reads the same camera at the
/// same size and rate for as long. The fake camera draws its frames in software, so both are
/// bounded by it on this machine; the ratio is what counts.
struct GenICamBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "genicam",
        abstract: "Frames and MB/s from a fake GigE Vision camera through an agent, against arv-camera-test-0.8 on it (needs root).")

    @Option(help: "Seconds each side is measured over.") var seconds: Double = 10
    @Option(help: "The camera's size: 512x512 (its boot region), 1024x1024 (binned) or 2048x2048 (full).") var size = "2048x2048"
    @Option(help: "The frame rate asked of the camera.") var fps: Double = 100
    @Option(help: "Namespace prefix (the fleet is torn down at the end).") var prefix: String = "cfgb"
    @Option(help: "The test bed script.") var script: String = "deploy/netns-fleet.sh"

    func run() throws {
        guard NetnsBenchFleet.mayRun("genicam") else { return }
        let dimensions = size.split(separator: "x").compactMap { Int($0) }
        guard dimensions.count == 2 else { throw BenchFailure("--size is WIDTHxHEIGHT, not \(size)") }
        print(
            "== GenICam: Aravis's fake GigE Vision camera on a namespace host's own link, GREY \(size) asked at \(fmt(fps)) fps, \(fmt(seconds)) s each"
        )
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-genicam-bench-\(getpid())").path
        let fleet = NetnsFleetScript(script: script, prefix: prefix, data: data)
        defer { fleet.down() }
        let hosts = try NetnsBenchFleet.up(fleet, agents: 1, agentArguments: "--synthetic 0 --no-pressure", upArguments: ["--genicam"])
        guard let camera = hosts.devices.first, camera.kind == .genicam else { throw BenchFailure("no GenICam camera registered: \(hosts.devices)") }
        let client = hosts.client
        try hosts.grantConsent([camera.deviceID])
        let formats = try client.call(.getFormats(.with { $0.deviceID = camera.deviceID })).reply.formats
        guard let index = formats.firstIndex(where: { $0.pixelFormat == "GREY" && Int($0.width) == dimensions[0] && Int($0.height) == dimensions[1] })
        else { throw BenchFailure("\(camera.deviceID) has no GREY \(size): \(formats.map { "\($0.pixelFormat) \($0.width)x\($0.height)" })") }
        _ = try client.call(.lockDevice(.with { $0.deviceID = camera.deviceID }))
        _ = try client.call(
            .changeFormat(
                .with {
                    $0.deviceID = camera.deviceID
                    $0.formatIndex = UInt32(index)
                }))
        _ = try client.call(
            .changeFrameRate(
                .with {
                    $0.deviceID = camera.deviceID
                    $0.framesPerSecond = fps
                }))
        Thread.sleep(forTimeInterval: 2)

        let agentPID = try Self.pid(data + "/pids/agent-a1.pid")
        func status() throws -> Capfleet_V1_DeviceStatus {
            guard let found = try client.call(.getFleetStats(.init())).reply.deviceStats.first(where: { $0.deviceID == camera.deviceID }) else {
                throw BenchFailure("no status for \(camera.deviceID)")
            }
            return found
        }
        let before = try status()
        let cpuBefore = TelemetryBenchFleet.cpuNanoseconds(pid: agentPID)
        let began = MonotonicTime.now()
        Thread.sleep(forTimeInterval: seconds)
        let after = try status()
        let elapsed = Double(MonotonicTime.now() - began) / 1e9
        let cpu = Double(TelemetryBenchFleet.cpuNanoseconds(pid: agentPID) &- cpuBefore) / (elapsed * 1e9) * 100
        let agentFPS = Double(after.framesCaptured &- before.framesCaptured) / elapsed
        let agentMiB = Double(after.bytesCaptured &- before.bytesCaptured) / elapsed / 1_048_576
        let incomplete = after.streamTransport.framesIncomplete &- before.streamTransport.framesIncomplete

        // The same camera, read by Aravis's own test program once the agent let go of it.
        kill(agentPID, SIGTERM)
        for _ in 0..<100 where kill(agentPID, 0) == 0 { Thread.sleep(forTimeInterval: 0.1) }
        let reference = try Self.aravisTest(namespace: "\(prefix)-a1", width: dimensions[0], height: dimensions[1], fps: fps, seconds: seconds)

        print("reader                 frames/s    MiB/s     incomplete   agent CPU")
        print(String(format: "capfleet agent        %8.1f   %8.1f   %8llu      %6.1f %% of a core", agentFPS, agentMiB, incomplete, cpu))
        print(String(format: "arv-camera-test-0.8   %8.1f   %8.1f", reference.fps, reference.mib))
        progress(
            "ratio agent/arv-camera-test: frames \(String(format: "%.2f", agentFPS / max(reference.fps, 0.001))), MiB/s \(String(format: "%.2f", agentMiB / max(reference.mib, 0.001)))"
        )
    }

    static func pid(_ path: String) throws -> Int32 {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8), let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            throw BenchFailure("cannot read the agent's pid from \(path)")
        }
        return pid
    }

    /// `arv-camera-test-0.8` in the agent's namespace for `seconds` (plus one to settle): the
    /// mean of the per-second "N frames/s - X MiB/s" lines it prints, the first one left out.
    static func aravisTest(namespace: String, width: Int, height: Int, fps: Double, seconds: Double) throws -> (fps: Double, mib: Double) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "ip", "netns", "exec", namespace, "stdbuf", "-oL", "arv-camera-test-0.8", "-f", fmt(fps), "-w", "\(width)", "-h", "\(height)",
        ]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        Thread.sleep(forTimeInterval: seconds + 2)
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let rows = text.split(separator: "\n").filter { $0.contains("frames/s") }.dropFirst().compactMap { line -> (Double, Double)? in
            let words = line.split(separator: " ")
            guard words.count >= 4, let frames = Double(words[0]), let mib = Double(words[3]) else { return nil }
            return (frames, mib)
        }
        guard !rows.isEmpty else { throw BenchFailure("arv-camera-test-0.8 printed no rates: \(text.suffix(400))") }
        return (rows.map(\.0).reduce(0, +) / Double(rows.count), rows.map(\.1).reduce(0, +) / Double(rows.count))
    }
}
