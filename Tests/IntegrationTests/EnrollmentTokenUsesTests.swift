import FleetBus
import FleetProtocol
import Foundation
import GRDB
import Testing

extension SecondLaneIntegrationTests {
    /// One token for many hosts (enrollment.md, "Multi-use tokens"), with the real
    /// coordinator, real agents and the CLI: uses, names, refusals, listing, revocation, and
    /// an agent that died before it heard its answer.
    @Suite struct EnrollmentTokenUsesTests {
        /// `capfleet agent` for `name`'s state directory, with `--name NAME` only when `named`.
        static func agent(_ fleet: FleetHarness, _ name: String, token: String, named: Bool) -> [String] {
            [
                "agent", "--coordinator", "127.0.0.1:\(fleet.controlPort)", "--synthetic", "1", "--no-discover", "--fps", "5",
                "--state-dir", fleet.directory + "/\(name)", "--enroll", token,
            ] + (named ? ["--name", name] : [])
        }

        static func token(_ fleet: FleetHarness, _ arguments: [String]) throws -> String {
            let made = try fleet.cli(["enroll"] + arguments + ["--quiet"])
            guard made.status == 0 else { throw HarnessError("capfleet enroll \(arguments) failed: \(made.error)") }
            return made.output.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        static func names(_ fleet: FleetHarness) throws -> Set<String> {
            Set(try fleet.nodes().compactMap { $0["name"] as? String })
        }

        @Test func aTokenForTwo_enrollsTwoRealAgents_namedByTheirFlagOrThePrefix_andRefusesTheThird() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            // Without --name-prefix, a token for many is refused before anything is made.
            let unnamed = try fleet.cli(["enroll", "--uses", "2"])
            #expect(unnamed.status != 0 && unnamed.error.contains("--name-prefix"), "\(unnamed.error)")
            let shared = try fleet.cli(["enroll", "--name", "x", "--uses", "2"])
            #expect(shared.status != 0 && shared.error.contains("cannot give them all one name"), "\(shared.error)")

            let token = try Self.token(fleet, ["--uses", "2", "--name-prefix", "cam-"])
            // One host names itself (as a DaemonSet does from the node's name); the other takes the pattern.
            let named = try fleet.launch("stage-left", Self.agent(fleet, "stage-left", token: token, named: true))
            let numbered = try fleet.launch("host-b", Self.agent(fleet, "host-b", token: token, named: false))
            try await fleet.waitUntil("both agents are online", seconds: 25) { try fleet.onlineNodeIDs().count == 2 }
            #expect(try Self.names(fleet) == ["stage-left", "cam-1"])

            let third = try fleet.launch("host-c", Self.agent(fleet, "host-c", token: token, named: false))
            try await fleet.waitUntil("the third agent gives up", seconds: 15) { !third.isRunning }
            #expect(third.process.terminationStatus != 0)
            #expect(third.log.contains("enrollment refused") && third.log.contains("all 2 uses of the token are spent"), "\(third.log.suffix(600))")
            #expect(named.isRunning && numbered.isRunning, "the enrolled agents stay")
            #expect(try fleet.nodes().count == 2, "the refused agent never registered")

            // The listing counts the uses and names the nodes.
            let listed = try fleet.json(["enroll", "list", "--all"])
            #expect(listed.count == 1)
            let entry = try #require(listed.first)
            #expect(entry["uses"] as? Int == 2 && entry["used"] as? Int == 2 && entry["remaining"] as? Int == 0, "\(entry)")
            #expect(entry["state"] as? String == "spent" && entry["name_prefix"] as? String == "cam-")
            let enrolled = (entry["enrollments"] as? [[String: Any]] ?? []).compactMap { $0["node_name"] as? String }
            #expect(Set(enrolled) == ["stage-left", "cam-1"], "\(entry)")
            #expect(try fleet.json(["enroll", "list"]).isEmpty, "a spent token is not open")
            #expect(try fleet.cli(["enroll", "list", "--all"]).output.contains("2/2"))

            // Every use is audited: who, which name, which token, what is left.
            let audit = try SecondLaneIntegrationTests.SecurityTests.audit(fleet, "node.enroll")
            let tokenKey = String(try EnrollmentToken(text: token).keys.publicKey.z85.prefix(8))
            let accepted = audit.filter { $0.hasPrefix("node.enroll ok") }
            #expect(accepted.count == 2, "\(audit)")
            #expect(accepted.allSatisfy { $0.contains("using token \(tokenKey)…") }, "\(accepted)")
            #expect(
                accepted.contains { $0.contains("enrolled as stage-left") } && accepted.contains { $0.contains("enrolled as cam-1") }, "\(accepted)")
            #expect(accepted.contains { $0.contains("1 of 2 use(s) left") } && accepted.contains { $0.contains("0 of 2 use(s) left") }, "\(accepted)")
            #expect(audit.contains { $0.hasPrefix("node.enroll refused") && $0.contains("all 2 uses") }, "\(audit)")
            #expect(try SecondLaneIntegrationTests.SecurityTests.audit(fleet, "enroll.token").contains { $0.contains("for 2 agent(s) named cam-N") })

            // A restart with the same --enroll needs no use: the agent knows it enrolled with it.
            named.stop()
            let again = try fleet.launch("stage-left-again", Self.agent(fleet, "stage-left", token: token, named: true))
            try await fleet.waitUntil("the restarted agent uses its saved key", seconds: 15) {
                again.log.contains("already enrolled with this token")
            }
            try await fleet.waitUntil("the restarted agent is online again", seconds: 25) { try fleet.onlineNodeIDs().count == 2 }
            #expect(again.isRunning && !again.log.contains("enrollment refused"), "\(again.log.suffix(600))")
            #expect(
                try SecondLaneIntegrationTests.SecurityTests.audit(fleet, "node.enroll").count == 3, "the restart spent nothing and tried nothing")
        }

        /// Enroll sent on a token connection, as an agent does, and the coordinator's answer.
        static func enroll(_ fleet: FleetHarness, token: EnrollmentToken, nodeID: String, key: CurvePublicKey) throws -> Capfleet_V1_Enrolled {
            let context = ZMQContext()
            let socket = try fleet.socket(.dealer, port: fleet.controlPort, keys: token.keys, context: context)
            defer { socket.close() }
            try socket.send(
                try Capfleet_V1_AgentMessage.with {
                    $0.enroll = .with {
                        $0.nodePublicKey = Data(key.bytes)
                        $0.nodeID = nodeID
                        $0.hostname = "crashy"
                        $0.softwareVersion = "test"
                    }
                }.serializedBytes() as [UInt8])
            guard socket.waitForInput(milliseconds: 5000), let answer = try socket.receiveMultipart(dontWait: true),
                case let .enrolled(enrolled)? = try Capfleet_V1_CoordinatorMessage(serializedBytes: answer.parts[0].array).body
            else {
                throw HarnessError("no Enrolled from the coordinator")
            }
            return enrolled
        }

        @Test func anAgentThatDiedBeforeItsAnswer_spendsNoSecondUse_andARevokedTokenAdmitsNobodyMore() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let text = try Self.token(fleet, ["--uses", "3", "--name-prefix", "rig-"])
            let token = try EnrollmentToken(text: text)

            // The coordinator records the enrollment; the agent dies before the answer reaches it,
            // with its node id and the key it was enrolling with kept in its state directory.
            let state = fleet.directory + "/crashy"
            let keys = try CurveKeyPair.generate()
            let first = try Self.enroll(fleet, token: token, nodeID: "node-crashy", key: keys.publicKey)
            #expect(first.status.isOK && first.nodeName == "rig-1", "\(first)")
            try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
            try "node-crashy\n".write(toFile: state + "/node-id", atomically: true, encoding: .utf8)
            try CurveCertificate(keys: keys, metadata: [("node-id", "node-crashy"), ("enrolling-with", token.keys.publicKey.z85)])
                .save(path: state + "/keys/agent.key_pending", title: "test")
            // Started again, it presents the same key, hears the same answer and comes online.
            let crashy = try fleet.launch("crashy", Self.agent(fleet, "crashy", token: text, named: false))
            try await fleet.waitUntil("the restarted agent is online", seconds: 25) { try fleet.onlineNodeIDs() == ["node-crashy"] }
            #expect(try Self.names(fleet) == ["rig-1"])
            #expect(!FileManager.default.fileExists(atPath: state + "/keys/agent.key_pending"), "the pending key became the agent's key file")
            #expect(try fleet.agentKeys("crashy").publicKey == keys.publicKey)
            var listed = try #require(try fleet.json(["enroll", "list"]).first)
            #expect(listed["used"] as? Int == 1 && listed["remaining"] as? Int == 2, "the repeat spent no use: \(listed)")
            #expect(try SecondLaneIntegrationTests.SecurityTests.audit(fleet, "node.enroll").contains { $0.contains("a repeat, no use spent") })

            // A name another node has is refused, and spends nothing.
            let copycat = try fleet.launch("rig-1", Self.agent(fleet, "rig-1", token: text, named: true))
            try await fleet.waitUntil("the copycat gives up", seconds: 15) { !copycat.isRunning }
            #expect(copycat.log.contains("the name rig-1") && copycat.log.contains("is taken by node node-crashy"), "\(copycat.log.suffix(600))")

            // Revoked, the token admits nobody more; the node it admitted stays online.
            // By the key's first 8 characters, as `enroll list` shows them; a Z85 key that begins with
            // "-" would read as an option, so that one is named by the token itself.
            let prefix = String(token.keys.publicKey.z85.prefix(8))
            let revoked = try fleet.cli(["enroll", "revoke", prefix.hasPrefix("-") ? text : prefix, "--reason", "image leaked"])
            #expect(revoked.status == 0 && revoked.output.contains("after 1 of 3 use(s)"), "\(revoked)")
            let late = try fleet.launch("late", Self.agent(fleet, "late", token: text, named: false))
            try await fleet.waitUntil("the late agent gives up", seconds: 15) { !late.isRunning }
            #expect(late.log.contains("the token was revoked") && late.log.contains("by ana"), "\(late.log.suffix(600))")
            #expect(try crashy.isRunning && fleet.onlineNodeIDs() == ["node-crashy"])
            listed = try #require(try fleet.json(["enroll", "list", "--all"]).first)
            #expect(listed["state"] as? String == "revoked" && listed["revoked_by"] as? String == "ana", "\(listed)")
            #expect(try SecondLaneIntegrationTests.SecurityTests.audit(fleet, "enroll.token.revoke").first?.contains("image leaked") == true)
            // Revoking it again says so; a viewer may not list tokens.
            #expect(try fleet.cli(["enroll", "revoke", text]).error.contains("revoked already"))
            #expect(try fleet.cli(["enroll", "list"], user: "vi").error.contains("needs the admin role"))
        }
    }
}
