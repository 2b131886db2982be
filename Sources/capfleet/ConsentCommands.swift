import ArgumentParser
import FleetClient
import FleetCore
import FleetProtocol
import Foundation

struct ConsentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "consent",
        abstract: "Whose camera may stream: grant, deny, revoke or restrict a device's consent, and see its history.",
        discussion: """
            A device sends real frames only while its consent is authorized; otherwise its stream carries black frames \
            of the same size and format. Every change is kept with who, when and why (--reason is required). \
            Restricting (a site policy forbids the device) and lifting a restriction need the admin role.
            """,
        subcommands: [Grant.self, Deny.self, Revoke.self, Restrict.self, History.self])

    struct Change: ParsableArguments {
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The device id.", completion: FleetCompletion.deviceIDs) var device: String
        @Option(help: "Why: kept in the device's consent history.") var reason: String
        @Flag(help: "Print JSON.") var json = false

        func run(_ action: ConsentAction) throws {
            let reply = try coordinator.call(
                .changeConsent(
                    .with {
                        $0.deviceID = device
                        $0.action = action.wire
                        $0.reason = reason
                    })
            ).reply
            guard let record = reply.consentHistory.first else { throw CLIFailure("the coordinator did not say what it recorded") }
            if json {
                struct View: Encodable {
                    var change: JSONViews.ConsentChange
                    var appliedByAgent: Bool

                    enum CodingKeys: String, CodingKey {
                        case change, appliedByAgent = "applied_by_agent"
                    }
                }
                print(try FleetTables.json(View(change: JSONViews.ConsentChange(record), appliedByAgent: reply.consentApplied)))
                return
            }
            let to = (ConsentState(wire: record.toState) ?? .notDetermined).rawValue.replacingOccurrences(of: "_", with: " ")
            let enforced =
                reply.consentApplied
                ? "the agent enforces it from the next frame"
                : "the node is offline or did not answer: its agent enforces this as soon as it is back, and until then what it was last told"
            print("\(device): consent \(to); \(enforced)")
        }
    }

    struct Grant: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Authorize the device: real frames may leave its host.")
        @OptionGroup var change: Change
        func run() throws { try change.run(.grant) }
    }

    struct Deny: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Deny: black frames from the next frame on.")
        @OptionGroup var change: Change
        func run() throws { try change.run(.deny) }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Withdraw a granted consent: black frames from the next frame on.")
        @OptionGroup var change: Change
        func run() throws { try change.run(.revoke) }
    }

    struct Restrict: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "A site policy forbids the device; only an admin can lift it (admin).")
        @OptionGroup var change: Change
        func run() throws { try change.run(.restrict) }
    }

    struct History: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Every change of the device's consent, oldest first.")
        @OptionGroup var coordinator: CoordinatorOptions
        @Argument(help: "The device id.", completion: FleetCompletion.deviceIDs) var device: String
        @Flag(help: "Print JSON.") var json = false

        func run() throws {
            let records = try coordinator.call(.getConsentHistory(.with { $0.deviceID = device })).reply.consentHistory
            print(json ? try FleetTables.json(records.map(JSONViews.ConsentChange.init)) : FleetTables.consentHistory(records))
        }
    }
}
