import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import Foundation

struct DashboardCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dashboard",
        abstract: "Sign a browser in to the coordinator's web dashboard; list and revoke signed-in browsers (admin).",
        discussion: """
            `capfleet dashboard login` prints a one-time sign-in URL for you (as your credential's operator): open it \
            within 10 minutes and that browser is signed in, with your role, for 12 hours. The link works once. \
            `capfleet dashboard sessions` lists signed-in browsers; `capfleet dashboard revoke ID` signs one out. \
            Removing an operator ends their sessions.
            """,
        subcommands: [Login.self, Sessions.self, Revoke.self],
        defaultSubcommand: Login.self)

    struct Login: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "login", abstract: "Print a one-time dashboard sign-in URL.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Option(name: .customLong("for"), help: "Another operator's link (admin): the browser is signed in as them.") var operatorName: String?
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            let client = try coordinator.client()
            let link: Capfleet_V1_DashboardSignIn
            do {
                link = try client.call(.createDashboardSignIn(.with { $0.operatorName = operatorName ?? "" })).reply.dashboardSignIn
            } catch {
                throw CLIFailure(error.description)
            }
            let host = client.address.host.contains(":") ? "[\(client.address.host)]" : client.address.host
            let url = "\(link.tls ? "https" : "http")://\(host):\(link.httpPort)\(link.path)"
            if json {
                print(try FleetTables.json(["url": url, "operator": link.operatorName, "expires_unix_ms": String(link.expiresUnixMs)]))
            } else {
                print(url)
                FileHandle.standardError.write(
                    Data("one-time sign-in for \(link.operatorName), until \(FleetTables.clock(link.expiresUnixMs)); it works once\n".utf8))
            }
        }
    }

    struct Sessions: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "sessions", abstract: "List browsers signed in to the dashboard (admin).")
        @OptionGroup var coordinator: CoordinatorOptions
        @Flag(help: "Also signed-out, revoked and expired sessions.") var all = false
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            let sessions = try coordinator.call(.listDashboardSessions(.with { $0.includeEnded = all })).reply.dashboardSessions
            if json {
                print(try FleetTables.json(sessions.map(DashboardSessionView.init)))
                return
            }
            guard !sessions.isEmpty else {
                print("no browser is signed in to the dashboard: `capfleet dashboard login` prints a sign-in URL")
                return
            }
            print(
                FleetTables.table(
                    ["SESSION", "OPERATOR", "SIGNED IN", "LAST SEEN", "EXPIRES", "ENDED", "FROM"],
                    sessions.map { session in
                        [
                            session.id, session.operatorName, FleetTables.clock(session.createdUnixMs), FleetTables.clock(session.lastSeenUnixMs),
                            FleetTables.clock(session.expiresUnixMs), session.endedUnixMs == 0 ? "-" : "by \(session.endedBy)", session.peer,
                        ]
                    }))
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "revoke", abstract: "Sign a browser out of the dashboard (admin, audited).")
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The session, as `capfleet dashboard sessions` shows it.") var session: String

        func run() throws {
            _ = try coordinator.call(.endDashboardSession(.with { $0.sessionID = session }))
            print("\(session): signed out")
        }
    }
}

/// `capfleet dashboard sessions --json`.
struct DashboardSessionView: Encodable {
    var id, operatorName, peer, userAgent: String
    var createdUnixMs, expiresUnixMs, lastSeenUnixMs: Int64
    var endedUnixMs: Int64?
    var endedBy: String?

    init(_ info: Capfleet_V1_DashboardSessionInfo) {
        id = info.id; operatorName = info.operatorName; peer = info.peer; userAgent = info.userAgent
        createdUnixMs = info.createdUnixMs; expiresUnixMs = info.expiresUnixMs; lastSeenUnixMs = info.lastSeenUnixMs
        endedUnixMs = info.endedUnixMs == 0 ? nil : info.endedUnixMs
        endedBy = info.endedBy.isEmpty ? nil : info.endedBy
    }

    enum CodingKeys: String, CodingKey {
        case id, operatorName = "operator_name", peer, userAgent = "user_agent", createdUnixMs = "created_unix_ms",
            expiresUnixMs = "expires_unix_ms", lastSeenUnixMs = "last_seen_unix_ms", endedUnixMs = "ended_unix_ms", endedBy = "ended_by"
    }
}
