import ArgumentParser
import FleetBus
import FleetClient
import FleetCoordinator
import FleetCore
import FleetProtocol
import Foundation

/// Who is acting, for audit lines written on the coordinator's host without a key.
var localActor: String { "local:" + (ProcessInfo.processInfo.environment["USER"] ?? "unknown") }

extension NodesCommand {
    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Cut a node off at once: its connections are closed and its key is refused from now on (admin, audited).")
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The node id or name, as `capfleet nodes` shows it.", completion: FleetCompletion.nodeIDs) var node: String
        @Option(help: "Why, for the audit log.") var reason: String = ""

        func run() throws {
            _ = try coordinator.call(
                .revokeNode(
                    .with {
                        $0.nodeID = node
                        $0.reason = reason
                    }))
            print("revoked node \(node): it is disconnected and cannot come back without a new enrollment")
        }
    }
}

struct WhoAmICommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "whoami", abstract: "Who the coordinator says your key belongs to, and its role.")
    @OptionGroup var coordinator: CoordinatorOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let you = try coordinator.call(.whoAmI(.init())).reply.you
        if json {
            print(try FleetTables.json(JSONViews.Operator(you)))
        } else {
            print("\(you.name) (\(OperatorRole(wire: you.role)?.rawValue ?? "no role")), key \(you.publicKey)")
        }
    }
}

struct OperatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "operator", abstract: "Manage who may watch and steer the fleet (admin).",
        subcommands: [Add.self, List.self, Remove.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Give someone a key with a role: viewer (look), operator (also steer devices and record), admin (also enroll, revoke, manage operators).",
            discussion: """
                Without --key a key pair is made here and written, with the coordinator's public key, to a credential \
                file (--out) for that person: keep it secret, hand it over privately. With --key, the person made their \
                own key pair and only the public key is recorded. \
                On the coordinator's host, --data DATA_DIR works without an admin key: that is how the first admin is made.
                """)
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The operator's name, as the audit log will show it.") var name: String
        @Option(help: "viewer, operator or admin.") var role: String
        @Option(help: "Their public key (40 Z85 characters), if they made their own key pair.") var key: String?
        @Option(help: "Where to write the new credential (default: NAME.credential here).") var out: String?
        @Option(help: "The coordinator's data directory, to add the operator on its host without an admin key (capfleet dev's folder works too).")
        var data: String?
        @Flag(help: "With --data: the folder is a new fleet's, whose coordinator has not run yet; make its keys and database.") var newFleet = false
        @Option(help: "The coordinator address to write into the credential (HOST:PORT of its operator endpoint).") var address: String?

        func run() async throws {
            guard let role = OperatorRole(rawValue: role) else { throw CLIFailure("--role \(role): write viewer, operator or admin") }
            var publicKey: CurvePublicKey?
            if let key {
                guard let parsed = CurvePublicKey(z85: key) else { throw CLIFailure("--key: a public key is 40 Z85 characters") }
                publicKey = parsed
            }
            let keys: CurveKeyPair?, coordinatorKey: CurvePublicKey
            var telemetry: String?
            if let data {
                let directory = try LocalAdministration.dataDirectory(named: data, newFleet: newFleet)
                (keys, coordinatorKey) = try await LocalAdministration.addOperator(
                    dataDirectory: directory, name: name, role: role,
                    publicKey: publicKey, by: localActor)
            } else {
                let credential = try coordinator.loadCredential()
                let made = publicKey == nil ? try CurveKeyPair.generate() : nil
                _ = try coordinator.call(
                    .addOperator(
                        .with {
                            $0.name = name
                            $0.role = role.wire
                            $0.publicKey = Data((publicKey ?? made!.publicKey).bytes)
                        }))
                (keys, coordinatorKey) = (made, credential.coordinatorKey)
                // So that their subscriber finds the telemetry endpoint from the file alone.
                let client = try coordinator.client()
                let port = (try? client.call(.whoAmI(.init())).reply.endpoints.telemetryPort) ?? 0
                let host = client.address.host
                if port > 0 { telemetry = "\(host.contains(":") ? "[\(host)]" : host):\(port)" }
            }
            guard let keys else {
                print("added \(name) as \(role.rawValue); give them the coordinator's public key: \(coordinatorKey.z85)")
                return
            }
            let path = out ?? "\(name).credential"
            let written = address ?? coordinator.coordinator
            do {
                try OperatorCredential(
                    name: name, role: role.rawValue, keys: keys, coordinatorKey: coordinatorKey, coordinator: written,
                    telemetry: telemetry
                ).save(path: path)
            } catch {
                throw CLIFailure("\(name) was added, but \(error); remove them with `capfleet operator remove \(name)` and try again")
            }
            print(
                "added \(name) as \(role.rawValue); their credential is \(path) (secret: hand it over privately; they use it with --credential or \(OperatorCredential.environmentVariable), or put it at ~/.config/capfleet/credential)"
            )
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List operators and their roles.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            let operators = try coordinator.call(.listOperators(.init())).reply.operators
            if json {
                print(try FleetTables.json(operators.map(JSONViews.Operator.init)))
            } else {
                print(FleetTables.operators(operators))
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Take an operator's key away (their next request is refused).")
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The operator's name.") var name: String

        func run() throws {
            _ = try coordinator.call(.removeOperator(.with { $0.name = name }))
            print("removed operator \(name)")
        }
    }
}
