import ArgumentParser
import FleetClient
import FleetProtocol
import Foundation

struct StorageCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storage",
        abstract: "The studio's storage takes are offloaded to: add, list or remove a destination (rclone backs every kind).",
        subcommands: [Add.self, List.self, Remove.self], defaultSubcommand: List.self)

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a destination, or replace the one of that name (admin; audited).",
            discussion: """
                BACKEND is rclone's: s3, sftp, webdav, smb, ftp, local, google cloud storage, azureblob, b2, swift. \
                --option gives its settings as rclone names them (rclone help backend BACKEND), --secret those that are \
                secrets: they are kept apart from the database, never shown again, and handed only to the hosts that upload. \
                A secret given as KEY=- is read from standard input, KEY=@FILE from a file, so it stays out of shell history. \
                Passwords (pass, password, key_file_pass) are given plain: rclone obscures them itself.
                Example: capfleet storage add nas --backend webdav --option url=https://nas.studio/dav --option vendor=other \
                --option user=capture --secret pass=- --root takes
                """)
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The destination's name (1 to 32 letters, digits, '-' or '_').") var name: String
        @Option(help: "rclone's backend.") var backend: String
        @Option(name: .customLong("option"), help: "A setting, KEY=VALUE (repeatable).") var options: [String] = []
        @Option(name: .customLong("secret"), help: "A secret setting, KEY=VALUE, KEY=- or KEY=@FILE (repeatable).") var secrets: [String] = []
        @Option(help: "The folder on the destination the fleet's takes go under (default: its top).") var root: String = ""
        @Flag(help: "Offload every take here once it is stored (from every host that holds parts of it).") var offloadWhenStopped = false
        @Option(
            help: ArgumentHelp(
                "Each day at this time (HH:MM, the coordinator's local time) offload every stopped take not yet proved here.",
                valueName: "HH:MM")) var offloadDaily: String = ""
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            var stdinUsed = false
            let settings = try Self.pairs(options, option: "--option")
            var hidden: [String: String] = [:]
            for (key, given) in try Self.pairs(secrets, option: "--secret") {
                if given == "-" {
                    guard !stdinUsed else { throw CLIFailure("--secret \(key)=-: only one secret can come from standard input") }
                    stdinUsed = true
                    hidden[key] = (readLine(strippingNewline: true) ?? "")
                } else if given.hasPrefix("@") {
                    do {
                        hidden[key] = try String(contentsOfFile: String(given.dropFirst()), encoding: .utf8)
                            .trimmingCharacters(in: .newlines)
                    } catch {
                        throw CLIFailure("--secret \(key)=\(given): cannot read \(given.dropFirst()): \(error.localizedDescription)")
                    }
                } else {
                    hidden[key] = given
                }
            }
            let reply = try coordinator.call(
                .changeStorage(
                    .with {
                        $0.destination = .with {
                            $0.name = name
                            $0.backend = backend
                            $0.options = settings
                            $0.secrets = hidden
                            $0.root = root
                            $0.offloadWhenStopped = offloadWhenStopped
                            $0.offloadDailyAt = offloadDaily
                        }
                    })
            ).reply
            if json {
                print(try FleetTables.json(reply.storage.map(StorageViews.Destination.init)))
            } else {
                print(reply.storage.map(StorageViews.summary).joined(separator: "\n"))
            }
        }

        static func pairs(_ given: [String], option: String) throws -> [String: String] {
            var pairs: [String: String] = [:]
            for word in given {
                guard let equals = word.firstIndex(of: "="), equals != word.startIndex else {
                    throw CLIFailure("\(option) \(word): write KEY=VALUE, e.g. \(option == "--option" ? "url=https://nas/dav" : "pass=-")")
                }
                let key = String(word[..<equals])
                guard pairs[key] == nil else { throw CLIFailure("\(option) \(key) is given twice") }
                pairs[key] = String(word[word.index(after: equals)...])
            }
            return pairs
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "Every destination: its backend, settings (secrets named, never shown) and folder.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            let destinations = try coordinator.call(.listStorage(.init())).reply.storage
            if json {
                print(try FleetTables.json(destinations.map(StorageViews.Destination.init)))
            } else {
                print(
                    destinations.isEmpty
                        ? "no storage destinations yet (capfleet storage add NAME --backend …)"
                        : destinations.map(StorageViews.summary).joined(separator: "\n"))
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a destination and its secrets (admin; audited).")
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The destination.") var name: String

        func run() throws {
            _ = try coordinator.call(
                .changeStorage(
                    .with {
                        $0.destination.name = name; $0.remove = true
                    }))
            print("storage destination \(name) removed")
        }
    }
}
