import ArgumentParser
import FleetBus
import FleetClient
import FleetCoordinator
import FleetCore
import FleetProtocol
import Foundation

struct EnrollCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enroll",
        abstract: "Make a token that lets one agent, or many, join the fleet; list and revoke tokens (admin).",
        discussion: """
            `capfleet enroll --name NAME` makes a one-time token for one agent, to be called NAME. \
            `capfleet enroll --uses 50 --name-prefix cam-` makes one token for up to 50 agents (one Kubernetes Secret, \
            one machine image): each is called what its own `capfleet agent --name` says, or else cam-1, cam-2, … in \
            order of use, skipping names other nodes have. `capfleet enroll list` shows the tokens and their uses; \
            `capfleet enroll revoke KEY` stops a token admitting anyone more (nodes it admitted stay).
            """,
        subcommands: [Create.self, List.self, Revoke.self],
        defaultSubcommand: Create.self)

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "create",
            abstract: "Make an enrollment token (the default: `capfleet enroll --name NAME`).",
            discussion: """
                Give the token to the agent: `capfleet agent --coordinator HOST --enroll TOKEN`. It carries the \
                coordinator's public key, so the agent knows it is talking to this coordinator. It admits --uses agents \
                (one by default) and expires after --valid seconds. With --data, the token is made on the coordinator's \
                host from its data directory, without an admin key.
                """)
        @OptionGroup var coordinator: CoordinatorOptions
        @Option(help: "The node's name, as operators will see it (a token for one agent).") var name: String?
        @Option(
            help:
                "For a token that admits several agents: nodes are called PREFIX1, PREFIX2, … in order of use, unless the agent is started with --name."
        ) var namePrefix: String?
        @Option(help: "How many agents the token admits (at most 10000); more than one needs --name-prefix.") var uses: Int = 1
        @Option(help: "How long the token stays valid, in seconds (at most 604800, a week).") var valid: UInt32 = 3600
        @Option(help: "The coordinator's data directory, to make the token on its host without an admin key (capfleet dev's folder works too).")
        var data: String?
        @Flag(help: "With --data: the folder is a new fleet's, whose coordinator has not run yet; make its keys and database.") var newFleet = false
        @Flag(help: "Print only the token (for scripts).") var quiet = false

        func run() async throws {
            let spec: EnrollmentTokenSpec
            do {
                spec = try EnrollmentTokenSpec(name: name ?? "", namePrefix: namePrefix ?? "", uses: uses)
            } catch {
                throw CLIFailure(error.description)
            }
            let token: String, expires: Int64
            if let data {
                guard valid > 0, valid <= 604_800 else { throw CLIFailure("--valid must be between 1 and 604800 seconds") }
                let directory = try LocalAdministration.dataDirectory(named: data, newFleet: newFleet)
                let made = try await LocalAdministration.createEnrollmentToken(
                    dataDirectory: directory, spec: spec, validSeconds: valid, by: localActor)
                (token, expires) = (made.token.text, made.expiresAt)
            } else {
                let reply = try coordinator.call(
                    .createEnrollment(
                        .with {
                            $0.name = name ?? ""
                            $0.namePrefix = namePrefix ?? ""
                            $0.uses = UInt32(spec.uses)
                            $0.validSeconds = valid
                        })
                ).reply
                (token, expires) = (reply.enrollmentToken, reply.enrollmentExpiresUnixMs)
            }
            guard !quiet else {
                print(token)
                return
            }
            let until = Date(timeIntervalSince1970: Double(expires) / 1000).formatted(.iso8601)
            let key = (try? EnrollmentToken(text: token)).map { String($0.keys.publicKey.z85.prefix(8)) } ?? "?"
            switch spec.naming {
            case let .fixed(name):
                print(
                    """
                    enrollment token for \(name) (works once, until \(until)):
                    \(token)
                    on the camera host: capfleet agent --coordinator COORDINATOR_HOST --enroll \(token)
                    """)
            case let .prefix(prefix):
                print(
                    """
                    enrollment token for \(spec.uses) agent(s), called \(prefix)1, \(prefix)2, … or by their own --name (until \(until); key \(key)):
                    \(token)
                    on each camera host: capfleet agent --coordinator COORDINATOR_HOST --enroll \(token) [--name NAME]
                    see its uses: capfleet enroll list; stop it: capfleet enroll revoke '\(key)' (quoted: a key may hold characters the shell reads)
                    """)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List enrollment tokens with their uses, and the nodes each admitted (admin).")
        @OptionGroup var coordinator: CoordinatorOptions
        @Flag(help: "Every token, also those spent, expired or revoked (by default only those that admit more agents).") var all = false
        @Option(help: "The coordinator's data directory, to list on its host without an admin key.") var data: String?
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            let tokens: [Capfleet_V1_EnrollmentTokenInfo]
            if let data {
                let directory = try LocalAdministration.dataDirectory(named: data, newFleet: false)
                let now = Date().unixMilliseconds
                tokens = try await LocalAdministration.enrollmentTokens(dataDirectory: directory, includeClosed: all)
                    .map { Capfleet_V1_EnrollmentTokenInfo($0, at: now) }
            } else {
                tokens = try coordinator.call(.listEnrollments(.with { $0.all = all })).reply.enrollmentTokens
            }
            print(json ? try FleetTables.json(tokens.map(EnrollmentViews.Token.init)) : EnrollmentViews.table(tokens, all: all))
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop a token admitting anyone more; the nodes it admitted stay enrolled (admin, audited).")
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The token's key, or its first 8 characters, as `capfleet enroll list` shows it; or the token itself.") var token: String
        @Option(help: "Why, for the audit log.") var reason: String = ""

        func run() throws {
            // A token given whole is named by its public key: its secret never goes on the wire.
            let key: String
            if token.hasPrefix(EnrollmentToken.prefix) {
                do {
                    key = try EnrollmentToken(text: token).keys.publicKey.z85
                } catch {
                    throw CLIFailure(error.description)
                }
            } else {
                key = token.hasSuffix("…") ? String(token.dropLast()) : token
            }
            let revoked = try coordinator.call(
                .revokeEnrollment(
                    .with {
                        $0.tokenKey = key
                        $0.reason = reason
                    })
            ).reply.enrollmentTokens.first
            let used = revoked.map { " after \($0.used) of \($0.uses) use(s)" } ?? ""
            print(
                "revoked token \(key.prefix(8))…\(used): it admits nobody more; the nodes it admitted stay (capfleet nodes revoke NODE cuts one off)")
        }
    }
}
