import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import FleetStorage
import FleetTestSupport
import Foundation

/// `capfleet-bench offload` (recordings.md, "Offloading a take"): a real WebDAV server
/// (`rclone serve webdav`) as the studio's storage; takes recorded on each agent's disk are
/// offloaded by the agents, against `rclone copy` of the same files in the same run, one host
/// against all of them, and a take recorded while the hosts offload counts what capture lost.
struct OffloadBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "offload",
        abstract: "Offload MB/s per host against rclone copy, aggregate MB/s of every host against one, capture drops during offload.")

    @Option(help: "Agents (one synthetic camera each).") var hosts: Int = 3
    @Option(help: "Seconds each take records.") var seconds: Double = 8
    @Option(help: "The cameras' format.") var format: String = "1280x720:YUYV"
    @Option(help: "The cameras' frame rate.") var fps: Double = 15
    @Option(help: "Seconds of each segment (several per take, as a real take has).") var segmentSeconds: Int = 1

    func run() throws {
        let directory = FileManager.default.currentDirectoryPath + "/.build/bench/offload-\(getpid())"
        let fleet = try LocalFleet(directory: directory, ports: try FleetPorts.free(record: false, metrics: false), output: .standardError)
        defer { fleet.remove() }
        let credential = try fleet.operatorCredential(for: "bench", role: "admin")
        _ = try fleet.startCoordinator(arguments: ["--log-level", "error"], environment: ["CAPFLEET_SEGMENT_SECONDS": "\(segmentSeconds)"])
        let session = try OperatorSession(address: fleet.operatorAddress, credential: credential, timeout: 30)
        func call(_ body: Capfleet_V1_OperatorRequest.OneOf_Body, timeout: Double = 30) throws -> Capfleet_V1_OperatorReply {
            let reply = try session.call(body, timeout: timeout).reply
            guard reply.status.code == .ok else { throw BenchFailure("the coordinator refused: \(reply.status.reason)") }
            return reply
        }
        // Unthrottled, as rclone copy is: the benchmark measures the transfer, not the rate limit.
        for index in 1...max(1, hosts) {
            _ = try fleet.startAgent(
                "off\(index)",
                arguments: [
                    "--synthetic", "1", "--no-discover", "--synthetic-format", format, "--fps", "\(fps)", "--no-pressure", "--log-level", "error",
                ], environment: ["CAPFLEET_COLLECT_RATE_MB": "0"])
        }
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            let nodes = try call(.listNodes(.init())).nodes
            if nodes.filter({ $0.online && $0.clock.sync == .locked }).count >= hosts { break }
            Thread.sleep(forTimeInterval: 0.5)
        }
        let devices = try call(.listDevices(.init())).devices.filter(\.online)
        guard devices.count >= hosts else { throw BenchFailure("\(devices.count) of \(hosts) cameras came online") }
        for device in devices where device.consent != .authorized {
            _ = try call(
                .changeConsent(
                    .with {
                        $0.deviceID = device.deviceID
                        $0.action = .grant
                        $0.reason = "offload benchmark"
                    }))
        }
        let server = try StorageServer("webdav")
        let rclone = try Rclone(destination: try server.destination())
        try waitReady(server, rclone)
        _ = try call(
            .changeStorage(
                .with {
                    $0.destination = .with {
                        $0.name = "studio"
                        $0.backend = "webdav"
                        $0.options = server.options
                        $0.secrets = ["pass": StorageServer.password]
                        $0.root = "fleet/takes"
                    }
                }))

        func take(_ cameras: [String], name: String) throws -> String {
            let started = try call(
                .startRecording(
                    .with {
                        $0.deviceIds = cameras
                        $0.name = name
                        $0.store = .agent
                    })
            ).takes[0]
            Thread.sleep(forTimeInterval: 1 + seconds)
            _ = try call(
                .stopRecording(
                    .with {
                        $0.takeID = started.id
                        $0.waitMs = 60_000
                    }), timeout: 70)
            return started.id
        }
        /// Seconds to offload the take, and its bytes.
        func offload(_ takeID: String) throws -> (seconds: Double, bytes: UInt64) {
            let start = MonotonicTime.now()
            let info = try session.offloadTake(takeID, to: "studio")
            let elapsed = Double(MonotonicTime.now() - start) / 1e9
            return (elapsed, info.offloads.first?.verifiedBytes ?? 0)
        }
        print(
            "\n== offload to a WebDAV server on this machine (rclone serve webdav), \(hosts) hosts, \(format) at \(fmt(fps)) fps, \(fmt(seconds)) s takes"
        )

        // One host: its take offloaded, against rclone copy of the same files.
        let one = try take([devices[0].deviceID], name: "one host")
        // The host of that camera (the listing's order is not the hosts').
        guard let host = try call(.listNodes(.init())).nodes.first(where: { $0.nodeID == devices[0].nodeID })?.name else {
            throw BenchFailure("no node holds \(devices[0].deviceID)")
        }
        let oneFolder = fleet.directory + "/\(host)/recordings/\(one)"
        func timed(_ arguments: [String]) throws -> Double {
            let start = MonotonicTime.now()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/rclone")
            process.arguments = ["-q"] + arguments
            process.environment = rclone.processEnvironment
            try process.run()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw BenchFailure("rclone \(arguments[0]) failed (exit \(process.terminationStatus))") }
            return Double(MonotonicTime.now() - start) / 1e9
        }
        let baselineSeconds = try timed(["copy", oneFolder, rclone.remoteName + ":baseline/\(one)"])
        // rclone's own way to the same proof: the folder copied, then every object read back.
        let provedSeconds =
            try timed(["copy", oneFolder, rclone.remoteName + ":proved/\(one)"])
            + timed(["check", "--download", "--one-way", oneFolder, rclone.remoteName + ":proved/\(one)"])
        let single = try offload(one)
        let segments = try call(.getRecording(.with { $0.takeID = one })).takes[0].segments.count
        let singleRate = Double(single.bytes) / 1e6 / max(single.seconds, 0.001)
        let baselineRate = Double(single.bytes) / 1e6 / max(baselineSeconds, 0.001)
        let provedRate = Double(single.bytes) / 1e6 / max(provedSeconds, 0.001)
        print(
            String(
                format: "one host: %.1f MB in %d segments in %.2f s = %.1f MB/s offloaded (with the proof: every object read back)",
                Double(single.bytes) / 1e6, segments, single.seconds, singleRate))
        print(
            String(
                format: "rclone copy of the same files: %.2f s = %.1f MB/s; offload / rclone copy = %.2fx (goal >= 0.9x)", baselineSeconds,
                baselineRate, singleRate / baselineRate))
        print(
            String(
                format: "rclone copy then rclone check --download (the same proof): %.2f s = %.1f MB/s; offload / that = %.2fx", provedSeconds,
                provedRate, singleRate / provedRate))

        // Every host at once, while a take records on every camera.
        let all = try take(devices.prefix(hosts).map(\.deviceID), name: "every host")
        let during = try call(
            .startRecording(
                .with {
                    $0.deviceIds = devices.prefix(hosts).map(\.deviceID)
                    $0.name = "during offload"
                    $0.store = .agent
                })
        ).takes[0]
        Thread.sleep(forTimeInterval: 1)
        let aggregate = try offload(all)
        _ = try call(
            .stopRecording(
                .with {
                    $0.takeID = during.id
                    $0.waitMs = 60_000
                }), timeout: 70)
        let aggregateRate = Double(aggregate.bytes) / 1e6 / max(aggregate.seconds, 0.001)
        print(
            String(
                format: "%d hosts at once: %.1f MB in %.2f s = %.1f MB/s aggregate; against one host %.2fx", hosts, Double(aggregate.bytes) / 1e6,
                aggregate.seconds, aggregateRate, aggregateRate / singleRate))
        let shown = try call(.getRecording(.with { $0.takeID = during.id })).takes[0]
        let dropped = shown.devices.reduce(0) { $0 + $1.drops.late + $1.drops.outOfBuffers + $1.drops.discontinuity }
        let frames = shown.devices.reduce(0) { $0 + $1.frames }
        print("capture during the offload: \(frames) frames recorded, \(dropped) dropped (goal: none)")
        print("(the machine's two cores run the server, the coordinator and every agent: the figures are this machine's, not a network's)")
    }

    private func waitReady(_ server: StorageServer, _ rclone: Rclone) throws {
        for _ in 0..<100 {
            do {
                _ = try rclone.size(of: "nothing-here")
                return
            } catch {}
            guard server.child.isRunning else { throw BenchFailure("the storage server stopped: \(server.child.log)") }
            Thread.sleep(forTimeInterval: 0.1)
        }
        throw BenchFailure("the storage server does not answer after 10 s")
    }
}
