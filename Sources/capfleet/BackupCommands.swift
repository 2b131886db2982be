import ArgumentParser
import FleetClient
import FleetCoordinator
import FleetProtocol
import FleetStore
import Foundation

/// `capfleet backup DEST`: a consistent copy of the running coordinator's fleet database
/// (SQLite's online backup), fetched over the operator endpoint and checked against its SHA-256.
struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copy the running coordinator's fleet database to a file (admin); restore it with `capfleet restore`.",
        discussion: """
            The copy is consistent (SQLite's online backup) and taken while the coordinator runs: takes in progress, \
            nodes and consent go on. It holds the whole fleet state: nodes and their keys' public halves, devices, \
            consent, operators, the recordings index and the audit log. Not in it: the coordinator's own key pair \
            (DATA/keys, copy it once, it never changes) and the recordings' files (DATA/recordings, or \
            recordings_dir).
            """)
    @OptionGroup var coordinator: CoordinatorOptions
    @Argument(help: "The file to write (replaced if it exists).") var destination: String
    @Flag(help: "Print a JSON summary.") var json = false

    func run() throws {
        let progress = TransferProgressDisplay(label: "backup", json: json)
        let snapshot = try coordinator.session().downloadBackup(to: destination, progress: progress.follow)
        let summary = try FleetDatabase.inspectBackup(at: destination)
        if json {
            print(
                try FleetTables.json([
                    "path": destination, "bytes": String(snapshot.size), "sha256": snapshot.sha256,
                    "schema_version": String(snapshot.schemaVersion), "taken_unix_ms": String(snapshot.takenUnixMs),
                    "nodes": String(summary.nodes), "takes": String(summary.takes),
                ]))
        } else {
            print(
                "backed up the fleet database to \(destination): \(RecordingViews.bytes(snapshot.size)), schema v\(snapshot.schemaVersion), \(summary.nodes) node(s), \(summary.takes) take(s); SHA-256 \(snapshot.sha256)"
            )
            print("not in it: the coordinator's keys (DATA/keys: copy them once) and the recordings' files")
        }
    }
}

/// `capfleet restore BACKUP --data DIR`: a backup in place as a stopped coordinator's database.
struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Put a backup from `capfleet backup` in place as a coordinator's fleet database (the coordinator stopped).",
        discussion: """
            Checks the backup first (SQLite's integrity check, a CaptureFleet database, a schema this binary knows). \
            Then start the coordinator with the same --data. For the agents to trust it, DATA/keys must hold the \
            coordinator's original key pair; for takes to play, the recordings' files must be where the index says.
            """)
    @Argument(help: "The backup file.") var backup: String
    @Option(help: "The coordinator's data directory.") var data: String
    @Flag(help: "Restore over an existing fleet database (kept beside it as fleet.sqlite.replaced-TIME).") var replace = false

    func run() throws {
        let progress = TransferProgressDisplay(label: "restore")
        let (summary, replaced) = try LocalAdministration.restore(backup: backup, dataDirectory: data, replacing: replace) { done, total in
            if progress.total != total { progress.follow(.started(total: total)) }
            progress.show(done)
        }
        progress.finish()
        if let replaced { print("kept the database that was there as \(replaced)") }
        print(
            "restored \(backup) into \(data)/fleet.sqlite: schema v\(summary.schemaVersion), \(summary.nodes) node(s), \(summary.takes) take(s), \(summary.auditEntries) audit entries"
        )
        if !FileManager.default.fileExists(atPath: data + "/keys") {
            print("note: \(data)/keys is missing: put the coordinator's original keys there before starting it, or every agent must enroll again")
        }
        print("start the coordinator: capfleet coordinator --data \(data)")
    }
}
