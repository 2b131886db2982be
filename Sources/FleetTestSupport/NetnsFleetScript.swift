import FleetHost
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// deploy/netns-fleet.sh run as a child: a coordinator and agents on network namespaces of
/// their own, each agent's link through a relay (needs root). The clock benchmark and the
/// multi-host integration tests drive it.
public struct NetnsFleetScript: Sendable {
    public let script: String
    public let prefix: String
    public let data: String

    public init(script: String, prefix: String, data: String) {
        self.script = script
        self.prefix = prefix
        self.data = data
    }

    /// Runs the script to the end and returns what it printed. Through ShellCommand
    /// (posix_spawn with a clean signal mask), so the processes `up` leaves running take
    /// SIGTERM, and into a file, not a pipe they would hold open.
    @discardableResult
    public func run(_ arguments: [String], timeoutMilliseconds: Int64 = 180_000) throws -> String {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent(
            "capfleet-netns-\(prefix)-\(getpid())-\(UUID().uuidString.prefix(8)).log"
        ).path
        defer { try? FileManager.default.removeItem(atPath: log) }
        let words = ["bash", script, "--prefix", prefix, "--data", data] + arguments
        let command = "exec " + words.map(Self.quoted).joined(separator: " ") + " >" + Self.quoted(log) + " 2>&1 </dev/null"
        do {
            try ShellCommand.run(command, environment: [:], timeoutMilliseconds: timeoutMilliseconds)
        } catch {
            let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw FleetTestError(
                "\((script as NSString).lastPathComponent) \(arguments.joined(separator: " ")) failed (\(error.description)):\n" + output.suffix(3000)
            )
        }
        return (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
    }

    public static func quoted(_ word: String) -> String { "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'" }

    /// Stops everything and removes the namespaces and DATA. Called on the way out, often
    /// after a failure that is the one worth reporting, so its own failure is only printed.
    /// Takes the fleet down and removes its state and logs, unless CAPFLEET_TEST_KEEP_LOGS is
    /// set (to read a failed run's logs in DATA/logs afterwards).
    public func down() {
        do {
            try run(ProcessInfo.processInfo.environment["CAPFLEET_TEST_KEEP_LOGS"] == nil ? ["down", "--purge"] : ["down"])
        } catch {
            FileHandle.standardError.write(Data("note: \(error)\n".utf8))
        }
    }
}
