import FleetTestSupport
import Foundation
import Testing

extension SecondLaneIntegrationTests {
    /// Shell completion of the fleet's names: a TAB where a device id or a node id goes offers
    /// the ids the coordinator knows, asked as the operator the line would act as; with no
    /// coordinator or no credential it offers nothing, says nothing and does not hold the shell.
    @Suite struct CompletionTests {
        /// An environment with no operator credential anywhere and no coordinator named, so
        /// that only what a test puts on the line counts; its HOME goes away with the fleet.
        static func bareEnvironment(_ fleet: FleetHarness) throws -> [String: String] {
            let home = fleet.directory + "/home"
            try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
            return ["HOME": home, "XDG_CONFIG_HOME": "", "CAPFLEET_CREDENTIAL": "", "CAPFLEET_COORDINATOR": ""]
        }

        /// What the generated scripts run on a TAB: `capfleet ---completion SUBCOMMANDS -- ARGUMENT
        /// WORD_INDEX CURSOR WORDS...`, the word being completed last, with `partial` typed of it.
        static func complete(
            _ fleet: FleetHarness, _ command: [String], argument: String = "positional@0", line: [String],
            partial: String = "", environment: [String: String]
        ) throws -> (status: Int32, output: String, error: String) {
            let words = ["capfleet"] + line + [partial]
            return try fleet.run(
                ["---completion"] + command + ["--", argument, "\(words.count - 1)", "\(partial.count)"] + words,
                environment: environment.merging(["SAP_SHELL": "bash"]) { $1 })
        }

        static func offered(_ output: String) -> Set<String> {
            Set(output.split(separator: "\n").map(String.init))
        }

        /// A coordinator and one agent with `cameras` synthetic cameras, once all are listed, and
        /// their device ids.
        static func fleet(cameras: Int) async throws -> (FleetHarness, devices: Set<String>) {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("completed", synthetic: cameras)
            try await fleet.waitUntil("the agent's cameras are listed", seconds: 20) { try fleet.json(["devices"]).count == cameras }
            return (fleet, Set(try fleet.json(["devices"]).compactMap { $0["device_id"] as? String }))
        }

        @Test func deviceAndNodeArguments_offerTheIDsTheCoordinatorKnows() async throws {
            let (fleet, devices) = try await Self.fleet(cameras: 2)
            let nodes = try fleet.onlineNodeIDs()
            let bare = try Self.bareEnvironment(fleet)
            // A viewer's credential is enough to list; given on the line as the command itself would take it.
            let connection = ["--coordinator", "127.0.0.1:\(fleet.operatorPort)", "--credential", try fleet.credential(for: "vi")]

            let grant = try Self.complete(fleet, ["consent", "grant"], line: ["consent", "grant"] + connection, environment: bare)
            #expect(grant.status == 0 && grant.error.isEmpty, "\(grant.error)")
            #expect(Self.offered(grant.output) == devices)

            // Every device of a take, with what is typed of the word so far narrowing the offer.
            let first = try #require(devices.sorted().first)
            let partial = String(first.prefix(first.count - 1))
            let record = try Self.complete(fleet, ["record", "start"], line: ["record", "start"] + connection, partial: partial, environment: bare)
            #expect(Self.offered(record.output) == devices.filter { $0.hasPrefix(partial) })

            // The coordinator and the credential from the environment, as an operator's shell has them.
            let environment = bare.merging([
                "CAPFLEET_COORDINATOR": "127.0.0.1:\(fleet.operatorPort)",
                "CAPFLEET_CREDENTIAL": try fleet.credential(for: "vi"),
            ]) { $1 }
            let forget = try Self.complete(fleet, ["nodes", "forget"], line: ["nodes", "forget"], environment: environment)
            #expect(Self.offered(forget.output) == nodes && !nodes.isEmpty, "\(forget.output)")
            let only = try Self.complete(fleet, ["devices"], argument: "--node", line: ["devices", "--node"], environment: environment)
            #expect(Self.offered(only.output) == nodes)
        }

        /// Through the bash script the binary generates, as bash runs it on a TAB.
        @Test func theBashScript_offersTheDeviceIDs() async throws {
            let (fleet, devices) = try await Self.fleet(cameras: 1)
            let script = try fleet.run(["--generate-completion-script", "bash"])
            #expect(script.status == 0)
            let scriptPath = fleet.directory + "/capfleet.bash"
            try script.output.write(toFile: scriptPath, atomically: true, encoding: .utf8)
            let line = "\(FleetHarness.binary) zoom "
            let driver = """
                source '\(scriptPath)'
                COMP_WORDS=('\(FleetHarness.binary)' zoom '') COMP_CWORD=2 COMP_LINE='\(line)' COMP_POINT=\(line.count)
                _capfleet '\(FleetHarness.binary)' '' zoom
                printf '%s\\n' "${COMPREPLY[@]}"
                """
            let environment = try Self.bareEnvironment(fleet).merging([
                "CAPFLEET_COORDINATOR": "127.0.0.1:\(fleet.operatorPort)",
                "CAPFLEET_CREDENTIAL": try fleet.credential(for: "vi"),
            ]) { $1 }
            let bash = try CapfleetBinary.run(["--noprofile", "--norc", "-c", driver], environment: environment, binary: "/bin/bash")
            #expect(bash.status == 0 && bash.error.isEmpty, "\(bash.error)")
            #expect(Self.offered(bash.output) == devices, "\(bash.output)")
        }

        @Test func withNoCoordinatorOrNoCredential_completionOffersNothingQuietly() throws {
            let fleet = try FleetHarness()
            let bare = try Self.bareEnvironment(fleet)
            // No credential at all: nothing to ask with.
            let none = try Self.complete(fleet, ["device"], line: ["device"], environment: bare)
            #expect(none.status == 0 && none.output.isEmpty && none.error.isEmpty, "\(none.output)\(none.error)")

            // A credential, but no coordinator on its port: nothing, within the completion's second.
            try fleet.startCoordinator()
            let credential = try fleet.credential(for: "vi")
            fleet.fleet.stop()
            let started = Date()
            let unreachable = try Self.complete(
                fleet, ["snapshot"],
                line: [
                    "snapshot", "--credential", credential,
                    "--coordinator", "127.0.0.1:\(fleet.operatorPort)",
                ], environment: bare)
            let seconds = Date().timeIntervalSince(started)
            #expect(
                unreachable.status == 0 && unreachable.output.isEmpty && unreachable.error.isEmpty,
                "\(unreachable.output)\(unreachable.error)")
            #expect(seconds < 3, "a TAB with no coordinator held the shell \(seconds) s")
        }
    }
}
