import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A host as the agent's pressure sampler reads it (`--pressure-root`): /proc and /sys
/// files in the kernel's own formats, under the test's directory.
struct HostFixture {
    let root: String

    init(in directory: String) throws {
        root = directory + "/host"
        try FileManager.default.createDirectory(atPath: root + "/proc/pressure", withIntermediateDirectories: true)
    }

    /// The agent arguments that make it read this tree every `intervalMilliseconds`.
    func agentArguments(intervalMilliseconds: Int = 200) -> [String] {
        ["--pressure-root", root, "--pressure-interval-ms", "\(intervalMilliseconds)"]
    }

    /// Writes a file whole: the sampler never sees half of one.
    func write(_ relative: String, _ text: String) throws {
        let path = root + relative
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try text.write(toFile: path + ".tmp", atomically: false, encoding: .utf8)
        _ = rename(path + ".tmp", path)
    }

    /// /proc/pressure/<resource> with `some avg10` at `percent`.
    func psi(_ resource: String, _ percent: Double) throws {
        try write(
            "/proc/pressure/\(resource)", "some avg10=\(percent) avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    }
}

/// A python3 that can import `modules`: the one on PATH (or CAPFLEET_PYTHON), else Debian's.
func pythonInterpreter(importing modules: String) throws -> String {
    for candidate in [ProcessInfo.processInfo.environment["CAPFLEET_PYTHON"], "python3", "/usr/bin/python3"].compactMap({ $0 }) {
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        probe.arguments = [candidate, "-c", "import \(modules)"]
        probe.standardOutput = FileHandle.nullDevice
        probe.standardError = FileHandle.nullDevice
        try probe.run()
        probe.waitUntilExit()
        if probe.terminationStatus == 0 { return candidate }
    }
    throw HarnessError("no python3 that imports \(modules): run scripts/install-deps.sh")
}
