import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import FleetTestSupport
import Foundation

/// Sound against picture in a recorded take, and what a microphone costs its agent (issue
/// "sound and other sensors"; proto-docs/microphones.md, recordings.md "Exporting with sound").
///
/// Two agents whose clocks are skewed on purpose (+3.2 s at +40 ppm, −1.5 s at −25 ppm): one a
/// synthetic camera, its flash overlay lit on the first frame after each fleet second and its
/// frames steered onto the fleet's grid, the other a synthetic microphone clicking on the same
/// seconds. A take of both, exported with `--mux`; the clicks and flashes are found in the
/// decoded file. Printed: the flash-after-click offsets (median, p99, largest), their drift
/// over the take (a straight line through them), and whether they stay within one audio block.
/// The microphone is processed as a studio would (high-pass 80 Hz, noise suppression 30 dB,
/// gain +6 dB; `--unprocessed` leaves it as captured), so the offsets also show the
/// suppressor's delay taken out of the times. Then the agent's CPU with `--microphones`
/// synthetic 48 kHz stereo microphones, unprocessed and processed, against the same agent
/// with none.
struct SoundBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sound", abstract: "Sound against picture in a recorded take across skewed clocks; agent CPU per microphone.")

    @Option(help: "The take's length in seconds.") var seconds: Double = 600
    @Option(help: "Synthetic microphones for the CPU figure.") var microphones = 8
    @Option(help: "Seconds each CPU figure is measured over.") var cpuSeconds: Double = 10
    @Option(help: "Copy the muxed files here, to look at them.") var keep: String?
    @Flag(help: "Record the microphone as captured, without processing.") var unprocessed = false

    /// What the processed figures use: a studio's usual low cut, noise suppression and a little gain.
    static let studioProcessing = AudioProcessingSettings(highPassHertz: 80, noiseSuppressionDecibels: 30, gainDecibels: 6)

    /// Sets `settings` on `microphone` under its lease, as an operator would.
    static func process(_ microphone: String, _ settings: AudioProcessingSettings, client: OperatorClient) throws {
        _ = try client.call(.lockDevice(.with { $0.deviceID = microphone }))
        _ = try client.call(
            .changeAudioProcessing(
                .with {
                    $0.deviceID = microphone
                    $0.processing = settings.wire
                }))
        _ = try client.call(.unlockDevice(.with { $0.deviceID = microphone }))
    }

    func run() throws {
        progress("== sound against picture: a \(fmt(seconds)) s take, camera and microphone on two agents with skewed clocks")
        let fleet = try LocalFleet(
            directory: FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-sound-bench-\(getpid())").path,
            ports: try FleetPorts.free(record: true, metrics: false), output: .standardError)
        defer { fleet.remove() }
        let credential = try fleet.operatorCredential(for: "bench", role: "admin")
        let credentialPath = try fleet.credential(for: "bench", role: "admin")
        try fleet.startCoordinator(arguments: ["--log-level", "error"])
        try fleet.startAgent(
            "picture",
            arguments: [
                "--synthetic", "1", "--no-discover", "--synthetic-format", "320x240:YUYV", "--fps", "15", "--synthetic-overlay",
                "flash@0.1,0.1,0.2", "--test-clock-skew", "+3.2s,+40ppm", "--log-level", "error",
            ])
        try fleet.startAgent(
            "sound",
            arguments: [
                "--synthetic", "0", "--no-discover", "--no-discover-microphones", "--synthetic-microphones", "1",
                "--test-clock-skew=-1.5s,-25ppm", "--log-level", "error",
            ])
        let client = try OperatorClient(address: fleet.operatorAddress, credential: credential)
        var camera: String?, microphone: String?
        for _ in 0..<200 where camera == nil || microphone == nil {
            let devices = (try? client.call(.listDevices(.init())).reply.devices) ?? []
            camera = devices.first { $0.kind == .synthetic }?.deviceID
            microphone = devices.first { $0.kind == .syntheticMicrophone }?.deviceID
            if camera == nil || microphone == nil { Thread.sleep(forTimeInterval: 0.1) }
        }
        guard let camera, let microphone else { throw BenchFailure("the camera and microphone never registered:\n\(fleet.logTails())") }
        try client.grantTestPatternConsent(camera)
        try client.grantTestPatternConsent(microphone)
        if !unprocessed { try Self.process(microphone, Self.studioProcessing, client: client) }
        progress("microphone processing: \(unprocessed ? "off" : Self.studioProcessing.summary)")
        func cli(_ arguments: [String], timeout: Double = 60) throws -> CapfleetBinary.Result {
            let result = try fleet.run(
                arguments + ["--coordinator", fleet.operatorAddress.description, "--credential", credentialPath, "--timeout", "\(timeout)"])
            guard result.status == 0 else {
                throw BenchFailure("capfleet \(arguments.joined(separator: " ")) failed: \(result.output)\(result.error)")
            }
            return result
        }
        // Both clocks locked, the camera's frames on the grid: a flash then starts on its second.
        let lockDeadline = Date().addingTimeInterval(60)
        while Date() < lockDeadline {
            let clocks = (try? client.call(.listNodes(.init())).reply.nodes.filter { $0.clock.sync == .locked }.count) ?? 0
            if clocks >= 2 { break }
            Thread.sleep(forTimeInterval: 0.5)
        }
        _ = try cli(["lock", camera])
        _ = try cli(["align", camera])
        Thread.sleep(forTimeInterval: 3)
        let started = try cli(["record", "start", camera, microphone, "--json"])
        guard let take = (try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any])?["id"] as? String else {
            throw BenchFailure("record start said \(started.output)")
        }
        Thread.sleep(forTimeInterval: seconds)
        _ = try cli(["record", "stop", take], timeout: 120)
        let exportDirectory = fleet.directory + "/export"
        _ = try cli(["recordings", "export", take, "--to", exportDirectory, "--mux"], timeout: 600)
        let muxed = try FileManager.default.contentsOfDirectory(atPath: exportDirectory + "/muxed").filter { $0.hasSuffix(".mkv") }.sorted()
        if let keep {
            try? FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
            for file in muxed { try? FileManager.default.copyItem(atPath: exportDirectory + "/muxed/" + file, toPath: keep + "/" + file) }
        }
        var offsets: [(at: Int64, offset: Int64)] = []
        var found: [String] = []
        for file in muxed {
            let path = exportDirectory + "/muxed/" + file
            let clicks = try SoundPictureProbe.clicks(in: path)
            // The patch: 64 px wide at 32,24 of a 320x240 frame; its lower right is read, clear
            // of the frame-number stamp in the corner.
            let flashes = try SoundPictureProbe.flashes(in: path, crop: (64, 56, 16, 16))
            offsets += zip(clicks, SoundPictureProbe.flashAfterClick(clicks: clicks, flashes: flashes)).map { ($0, $1) }
            found.append("\(file): \(clicks.count) clicks, \(flashes.count) flashes")
        }
        guard offsets.count >= 2 else { throw BenchFailure("found \(offsets.count) click-and-flash pairs: \(found.joined(separator: "; "))") }
        let sorted = offsets.map(\.offset).sorted()
        let median = sorted[sorted.count / 2], p99 = sorted[min(sorted.count - 1, sorted.count * 99 / 100)]
        let largest = sorted.map { abs($0) }.max() ?? 0
        // The drift: a straight line through the offsets against the take's time.
        let xs = offsets.map { Double($0.at) / 1e9 }, ys = offsets.map { Double($0.offset) / 1e6 }
        let meanX = xs.reduce(0, +) / Double(xs.count), meanY = ys.reduce(0, +) / Double(ys.count)
        let sxx = zip(xs, xs).map { ($0 - meanX) * ($1 - meanX) }.reduce(0, +)
        let slope = sxx > 0 ? zip(xs, ys).map { ($0 - meanX) * ($1 - meanY) }.reduce(0, +) / sxx : 0
        print("pairs   flash after click: median     p99         largest |.|   spread        drift")
        print(
            String(
                format: "%-7d %+8.2f ms   %+8.2f ms   %8.2f ms    %8.2f ms   %+.2f ms/hour", offsets.count, Double(median) / 1e6, Double(p99) / 1e6,
                Double(largest) / 1e6, Double(sorted.last! - sorted.first!) / 1e6, slope * 3600))
        progress(
            "within one audio block (10 ms) of the picture: \(largest <= 10_000_000 ? "yes" : "no"); ratio largest/10 ms: \(fmt(Double(largest) / 10_000_000))"
        )
        fleet.stop()

        progress("== agent CPU per 48 kHz stereo microphone (\(microphones) synthetic, consent granted, nobody listening)")
        let none = try Self.agentCPU(microphones: 0, processing: .off, seconds: cpuSeconds)
        let plain = try Self.agentCPU(microphones: microphones, processing: .off, seconds: cpuSeconds)
        let processed = try Self.agentCPU(microphones: microphones, processing: Self.studioProcessing, seconds: cpuSeconds)
        let perPlain = (plain - none) / Double(max(microphones, 1))
        let perProcessed = (processed - none) / Double(max(microphones, 1))
        print("agent with 0 microphones   with \(microphones)   per microphone   with \(microphones) processed   per microphone")
        print(
            String(
                format: "%8.2f %%              %6.2f %%   %6.3f %%          %6.2f %%             %6.3f %% of a core", none, plain, perPlain,
                processed,
                perProcessed))
        progress(
            "processing (\(Self.studioProcessing.summary)): ratio processed/unprocessed per microphone \(fmt(perProcessed / max(perPlain, 0.001)))")
    }

    /// The agent's CPU, % of a core: one small synthetic camera and `microphones` synthetic
    /// microphones, each processed with `processing`.
    static func agentCPU(microphones: Int, processing: AudioProcessingSettings, seconds: Double) throws -> Double {
        do {
            let fleet = try LocalFleet(
                directory: FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-sound-cpu-\(getpid())-\(microphones)").path,
                ports: try FleetPorts.free(record: false, metrics: false), output: .standardError)
            defer { fleet.remove() }
            let credential = try fleet.operatorCredential(for: "bench", role: "admin")
            try fleet.startCoordinator(arguments: ["--log-level", "error"])
            let agent = try fleet.startAgent(
                "cpu",
                arguments: [
                    "--synthetic", "1", "--no-discover", "--no-discover-microphones", "--synthetic-format", "320x240:YUYV", "--fps", "15",
                    "--synthetic-microphones", "\(microphones)", "--log-level", "error",
                ])
            let client = try OperatorClient(address: fleet.operatorAddress, credential: credential)
            var found: [String] = []
            for _ in 0..<100 where found.count < microphones {
                found = ((try? client.call(.listDevices(.init())).reply.devices) ?? []).filter { $0.kind == .syntheticMicrophone }.map(\.deviceID)
                if found.count < microphones { Thread.sleep(forTimeInterval: 0.1) }
            }
            for device in found {
                try client.grantTestPatternConsent(device)
                if processing.isOn { try process(device, processing, client: client) }
            }
            Thread.sleep(forTimeInterval: 2)
            let start = TelemetryBenchFleet.cpuNanoseconds(pid: agent.processIdentifier)
            let began = MonotonicTime.now()
            Thread.sleep(forTimeInterval: seconds)
            let used = TelemetryBenchFleet.cpuNanoseconds(pid: agent.processIdentifier) &- start
            let figure = Double(used) / Double(MonotonicTime.now() - began) * 100
            fleet.stop()
            return figure
        }
    }
}
