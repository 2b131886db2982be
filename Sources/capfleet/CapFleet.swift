import ArgumentParser
import FleetProtocol
import Foundation
import Logging

@main
struct CapFleet: AsyncParsableCommand {
    static func main() async {
        // A mistyped command of a group is named as such, not as the option after it.
        let arguments = Array(CommandLine.arguments.dropFirst())
        do {
            _ = try parseAsRoot(arguments)
        } catch {
            if let mistake = CommandGroupCheck.mistake(in: arguments, root: CapFleet.self) {
                FileHandle.standardError.write(Data("Error: \(mistake)\n".utf8))
                Foundation.exit(ExitCode.validationFailure.rawValue)
            }
        }
        await main(nil)
    }

    static let configuration = CommandConfiguration(
        commandName: "capfleet",
        abstract: "CaptureFleet: run and steer a fleet of cameras across many hosts.",
        discussion: """
            Start everything on this machine with `capfleet dev`, then look at the fleet from another \
            terminal with `capfleet nodes`, `capfleet devices` and `capfleet watch`.

            A fleet is one coordinator (`capfleet coordinator`; the unit capfleet-coordinator) and an \
            agent on every camera host (`capfleet agent`; the unit capfleet-agent), which joins once with \
            a token from `capfleet enroll`. Every other command is an operator's: it asks the \
            coordinator's operator endpoint, as the holder of an operator credential that an admin made \
            with `capfleet operator add`, and the credential's role (viewer, operator, admin) decides \
            what it may do. Each command has a manual page of its own, e.g. `man capfleet-record-start` \
            (the package installs them; in a source build scripts/dev.sh puts them in ~/.local/share/man, \
            or run scripts/install-manual-and-completions.sh), and `capfleet help record start` \
            prints the same anywhere.

            Environment:
              CAPFLEET_COORDINATOR   the coordinator's HOST[:PORT]
              CAPFLEET_CREDENTIAL    the operator credential file
              CAPFLEET_LOG_LEVEL     the daemons' log level (default info)
              CAPFLEET_<KEY>         any setting of coordinator.conf or agent.conf

            Files:
              ~/.config/capfleet/credential  the operator credential used by default
              /etc/capfleet/*.conf           the packaged daemons' settings
              /var/lib/capfleet              the packaged coordinator's data
              /var/lib/capfleet-agent        the packaged agent's identity and key
            """,
        version: "\(WireDefaults.release) (protocol \(WireDefaults.protocolMajor.rawValue).\(WireDefaults.protocolMinor))",
        subcommands: [
            DevCommand.self, CoordinatorCommand.self, AgentCommand.self,
            NodesCommand.self, ClockCommand.self, SyncCheckCommand.self, SyncAuditCommand.self, AlignCommand.self, DevicesCommand.self,
            DeviceCommand.self,
            FormatsCommand.self, WatchCommand.self, PressureCommand.self, EventsCommand.self,
            FormatCommand.self, PresetCommand.self, FrameRateCommand.self, ZoomDeviceCommand.self, FocusCommand.self,
            LockCommand.self, UnlockCommand.self, PolicyCommand.self,
            SnapshotCommand.self, ViewCommand.self, ListenCommand.self, ContactSheetCommand.self, StillCommand.self, StillsCommand.self,
            DetectCommand.self, ProcessingCommand.self, ControlCommand.self, RegionCommand.self, PreRollCommand.self, MomentCommand.self,
            MomentsCommand.self, MomentRuleCommand.self,
            MetadataCommand.self, SensorCommand.self, ScanSetupCommand.self, OpticsCommand.self, IngestStatsCommand.self, RecordCommand.self,
            RecordingsCommand.self, StorageCommand.self,
            ConsentCommand.self, EnrollCommand.self, OperatorCommand.self, WhoAmICommand.self, DashboardCommand.self, BackupCommand.self,
            RestoreCommand.self,
        ])
}

/// Options every long-running command shares.
struct LoggingOptions: ParsableArguments {
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical. Environment: CAPFLEET_LOG_LEVEL.")
    var logLevel: String?

    func bootstrap(label: String) -> Logger {
        let level = self.level
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        return Logger(label: label)
    }

    /// Logs to `path` (appended to) instead of the terminal; errors go to both.
    func bootstrap(label: String, file path: String) throws -> Logger {
        let level = self.level
        let descriptor = try FileLogHandler.open(path)
        LoggingSystem.bootstrap { label in
            var terminal = StreamLogHandler.standardError(label: label)
            terminal.logLevel = .error
            return MultiplexLogHandler([FileLogHandler(label: label, descriptor: descriptor, logLevel: level), terminal])
        }
        return Logger(label: label)
    }

    private var level: Logger.Level {
        let text = logLevel ?? ProcessInfo.processInfo.environment["CAPFLEET_LOG_LEVEL"] ?? "info"
        return Logger.Level(rawValue: text.lowercased()) ?? .info
    }
}

/// Where operator commands find the coordinator.
struct CoordinatorOptions: ParsableArguments {
    @Option(name: .long, help: "Coordinator HOST[:PORT] of its operator endpoint (default 127.0.0.1:7602; environment: CAPFLEET_COORDINATOR).")
    var coordinator: String?

    @Option(
        help:
            "Seconds to wait at least for the coordinator's answer (requests that wait on agents or an instant get as long as the coordinator may take: proto-docs/operator.md, \"Time limits\")."
    )
    var timeout: Double = 3

    @Option(help: "Your operator credential (default: CAPFLEET_CREDENTIAL, else ~/.config/capfleet/credential).")
    var credential: String?
}

/// Prints an error the way the CLI reports every failure: one line saying what and how to fix it.
struct CLIFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
