import Foundation

/// A QEMU guest with the kernel's vivid virtual camera driver (Tests/vm/run.sh), running a
/// `capfleet agent` against real V4L2 devices and reporting to a coordinator on this host.
/// The test drives the guest through a shared directory: it drops shell commands in as
/// `cmd-N.sh`, the guest runs them in order and leaves `cmd-N.rc` and `cmd-N.out`.
final class VividRig: @unchecked Sendable {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    static var runScript: String { repository + "/Tests/vm/run.sh" }

    let share: String
    let process = Process()
    let logPath: String
    private var nextCommand = 0

    /// The capfleet binary as the guest sees it: a copy in the share, because the guest's
    /// /tmp is its own (a checkout under /tmp would be invisible there).
    static func guestBinary(share: String) throws -> String {
        try FileManager.default.createDirectory(atPath: share, withIntermediateDirectories: true)
        let copy = share + "/capfleet"
        if !FileManager.default.fileExists(atPath: copy) { try FileManager.default.copyItem(atPath: FleetHarness.binary, toPath: copy) }
        return copy
    }

    /// The guest's `capfleet agent` for the V4L2 `devices` only, enrolling with `fleet` as
    /// `name`, with `options` (format, rate, log level) added.
    static func agentCommand(share: String, fleet: FleetHarness, name: String, devices: [String], options: String) throws -> String {
        "\(try guestBinary(share: share)) agent --coordinator $CAPFLEET_HOST_ADDR:\(fleet.controlPort) --name \(name)"
            + devices.map { " --device \($0)" }.joined() + " --no-discover --synthetic 0 --state-dir /tmp/agent \(options)"
            + " --enroll \(try fleet.enrollmentToken(name: name))"
    }

    /// The end of a guest script: stops the agent whose pid is in /tmp/agent.pid (and any
    /// other pids named), politely first.
    static func stopAgent(alsoKilling others: String = "") -> String {
        """
        A=$(cat /tmp/agent.pid)
        kill $A 2>/dev/null
        for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 $A 2>/dev/null || break; sleep 0.5; done
        kill -9 $A \(others) 2>/dev/null
        exit 0
        """
    }

    /// The fleet's ports the guest's agent reaches.
    static func ports(of fleet: FleetHarness) -> [UInt16] { [fleet.controlPort, fleet.ingestPort, fleet.clockPort, fleet.recordPort] }

    /// Boots the guest: vivid with `vividParameters`, then the guest script `guestScript`
    /// (which must start the agent and serve commands; see `commandLoop`).
    init(share: String, vividParameters: String, forwardPorts: [UInt16], guestScript: String, timeoutSeconds: Int = 280) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.runScript) else {
            throw HarnessError("no VM rig at \(Self.runScript)")
        }
        guard FileManager.default.fileExists(atPath: Self.repository + "/.build-vm/current") else {
            throw HarnessError("the VM rig is not prepared: run Tests/vm/prepare.sh (scripts/test.sh does)")
        }
        self.share = share
        try FileManager.default.createDirectory(atPath: share, withIntermediateDirectories: true)
        try guestScript.write(toFile: share + "/guest.sh", atomically: true, encoding: .utf8)
        logPath = share + "/vm.log"
        // FileHandle below says why when the log cannot be created.
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        let forward = forwardPorts.isEmpty ? [] : ["--forward", forwardPorts.map(String.init).joined(separator: ",")]
        process.arguments =
            [Self.runScript, "--vivid", vividParameters, "--share", share] + forward
            + ["--timeout", "\(timeoutSeconds)", "--", "/bin/sh", share + "/guest.sh"]
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    deinit { stop() }

    /// Asks the guest to end its script (the agent stops), and waits for the VM to power off.
    func stop() {
        guard process.isRunning else { return }
        // Without the stop file the guest cannot be asked: power it off at once.
        let asked = FileManager.default.createFile(atPath: share + "/stop", contents: nil)
        let deadline = Date().addingTimeInterval(asked ? 30 : 0)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.2) }
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func file(_ name: String) -> String? { try? String(contentsOfFile: share + "/" + name, encoding: .utf8) }

    /// Runs a shell command in the guest and returns its exit code and output.
    func run(_ command: String, timeout: Double = 60) throws -> (status: Int32, output: String) {
        let index = nextCommand
        nextCommand += 1
        let script = share + "/cmd-\(index).sh"
        try command.write(toFile: script + ".tmp", atomically: true, encoding: .utf8)
        try FileManager.default.moveItem(atPath: script + ".tmp", toPath: script)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let rc = file("cmd-\(index).rc"), let status = Int32(rc.trimmingCharacters(in: .whitespacesAndNewlines)) {
                return (status, file("cmd-\(index).out") ?? "")
            }
            guard process.isRunning else { throw HarnessError("the VM stopped before running `\(command)`:\n\(log.suffix(3000))") }
            Thread.sleep(forTimeInterval: 0.1)
        }
        throw HarnessError("the guest did not run `\(command)` within \(Int(timeout)) s:\n\(log.suffix(3000))")
    }

    /// The part of a guest script that serves `run(_:)` until the test says stop.
    static func commandLoop(share: String) -> String {
        """
        n=0
        while [ ! -e \(share)/stop ]; do
          if [ -e \(share)/cmd-$n.sh ]; then
            sh \(share)/cmd-$n.sh > \(share)/cmd-$n.out 2>&1
            echo $? > \(share)/cmd-$n.rc.tmp && mv \(share)/cmd-$n.rc.tmp \(share)/cmd-$n.rc
            n=$((n + 1))
          else
            sleep 0.1
          fi
        done
        """
    }
}

/// What `v4l2-ctl --list-formats-ext` prints, reduced to pixel format → size → frame rates.
enum V4L2CtlFormats {
    struct Entry: Hashable, CustomStringConvertible {
        var pixelFormat: String
        var width: Int
        var height: Int
        var rates: [Double]
        var description: String { "\(width)x\(height) \(pixelFormat) \(rates)" }
    }

    static func parse(_ text: String) -> Set<Entry> {
        var entries: Set<Entry> = []
        var pixel: String?
        var size: (Int, Int)?
        var rates: [Double] = []
        func flush() {
            if let pixel, let size { entries.insert(Entry(pixelFormat: pixel, width: size.0, height: size.1, rates: rates.sorted())) }
            rates = []
        }
        for line in text.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line.hasPrefix("["), let open = line.firstIndex(of: "'"), let close = line[line.index(after: open)...].firstIndex(of: "'") {
                flush()
                size = nil
                // v4l2-ctl writes big-endian variants as 'AR15-BE', as the fleet does.
                // (with its padding, e.g. 'Y16 -BE', which the fleet writes Y16-BE).
                pixel = String(line[line.index(after: open)..<close]).replacingOccurrences(of: " ", with: "")
            } else if line.hasPrefix("Size: Discrete "), let text = line.split(separator: " ").last {
                flush()
                let parts = text.split(separator: "x").compactMap { Int($0) }
                size = parts.count == 2 ? (parts[0], parts[1]) : nil
            } else if line.hasPrefix("Interval: Discrete"), let open = line.firstIndex(of: "("),
                let fps = Double(line[line.index(after: open)...].split(separator: " ").first ?? "")
            {
                rates.append(fps)
            }
        }
        flush()
        return entries
    }
}
