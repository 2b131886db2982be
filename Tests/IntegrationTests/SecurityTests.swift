import FleetBus
import FleetProtocol
import Foundation
import GRDB
import Testing

extension SecondLaneIntegrationTests {
    /// Who may connect and who may command, through real processes and sockets: CURVE on
    /// every endpoint, the ZAP handler, enrollment tokens, roles and revocation.
    @Suite struct SecurityTests {
        /// Audit rows `action outcome target detail` whose action starts with `prefix`.
        static func audit(_ fleet: FleetHarness, _ prefix: String) throws -> [String] {
            try DatabaseQueue(path: fleet.databasePath).read { db in
                try String.fetchAll(
                    db, sql: "SELECT action || ' ' || outcome || ' ' || target || ' ' || detail FROM auditLog WHERE action LIKE ? ORDER BY id",
                    arguments: [prefix + "%"])
            }
        }

        static func rejections(_ fleet: FleetHarness) throws -> [String: Int] {
            Dictionary(uniqueKeysWithValues: try fleet.json(["rejections"]).map { ("\($0["endpoint"]!)/\($0["reason"]!)", $0["count"] as? Int ?? 0) })
        }

        /// An agent whose state directory holds a key file the coordinator never enrolled.
        static func strangerState(_ fleet: FleetHarness, name: String, coordinatorKey: CurvePublicKey) throws {
            let keys = try CurveKeyPair.generate()
            try CurveCertificate(keys: keys, metadata: [("node-id", "node-\(name)"), ("name", name), ("coordinator-key", coordinatorKey.z85)])
                .save(path: fleet.directory + "/\(name)/keys/agent.key_secret", title: "forged")
        }

        @Test func strangers_unknownKeysWrongCoordinatorKeysAndBadTokens_cannotRegister_andAreCountedAndAudited() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("member")
            try await fleet.waitUntil("the enrolled agent is online", seconds: 20) { try fleet.onlineNodeIDs().count == 1 }
            let coordinatorKey = try fleet.coordinatorKey()

            // A key nobody enrolled, and an enrolled-looking agent that trusts the wrong coordinator key.
            try Self.strangerState(fleet, name: "unknown", coordinatorKey: coordinatorKey)
            let unknown = try fleet.startAgent("unknown")
            try Self.strangerState(fleet, name: "misled", coordinatorKey: try CurveKeyPair.generate().publicKey)
            let misled = try fleet.startAgent("misled")

            // Tokens: one spent twice, one expired, one forged (right coordinator key, keys it never issued).
            let token = try fleet.enrollmentToken(name: "first")
            _ = try fleet.launch("first", Self.agentArguments(fleet, "first") + ["--enroll", token])
            try await fleet.waitUntil("the first token's agent is online", seconds: 20) { try fleet.onlineNodeIDs().count == 2 }
            let replay = try fleet.launch("replay", Self.agentArguments(fleet, "replay") + ["--enroll", token])
            let expiredToken = try fleet.enrollmentToken(name: "late", validSeconds: 1)
            try await Task.sleep(for: .milliseconds(1500))
            let expired = try fleet.launch("expired", Self.agentArguments(fleet, "expired") + ["--enroll", expiredToken])
            let forgedToken = EnrollmentToken(keys: try CurveKeyPair.generate(), coordinatorKey: coordinatorKey).text
            let forged = try fleet.launch("forged", Self.agentArguments(fleet, "forged") + ["--enroll", forgedToken])

            for (process, reason) in [(replay, "already used"), (expired, "expired"), (forged, "does not know this token")] {
                try await fleet.waitUntil("the \(process.name) agent gives up", seconds: 15) { !process.isRunning }
                #expect(process.process.terminationStatus != 0)
                #expect(process.log.contains("enrollment refused") && process.log.contains(reason), "\(process.name): \(process.log.suffix(600))")
            }
            try await Task.sleep(for: .seconds(2))
            #expect(try fleet.onlineNodeIDs().count == 2, "only the enrolled agents are online")
            #expect(try fleet.nodes().count == 2, "no stranger ever registered")
            #expect(unknown.isRunning && misled.isRunning, "they keep knocking, and keep being refused")
            #expect(unknown.log.contains("refused this node's key"), "\(unknown.log.suffix(600))")

            let counted = try Self.rejections(fleet)
            #expect((counted["control/unknown_key"] ?? 0) >= 2, "the unknown key and the forged token: \(counted)")
            #expect((counted["control/handshake_failed"] ?? 0) >= 1, "the wrong coordinator key: \(counted)")
            #expect((counted["control/bad_token"] ?? 0) >= 2, "the replayed and the expired token: \(counted)")
            let denied = try Self.audit(fleet, "access.denied")
            let everything = try Self.audit(fleet, "")
            #expect(denied.contains { $0.hasPrefix("access.denied refused control unknown_key") }, "\(everything)")
            #expect(denied.contains { $0.hasPrefix("access.denied refused control handshake_failed") }, "\(denied)")
            let enrollments = try Self.audit(fleet, "node.enroll")
            #expect(enrollments.filter { $0.hasPrefix("node.enroll ok") }.count == 2, "\(enrollments)")
            #expect(enrollments.contains { $0.hasPrefix("node.enroll refused") && $0.contains("already used") }, "\(enrollments)")
            #expect(enrollments.contains { $0.hasPrefix("node.enroll refused") && $0.contains("expired") }, "\(enrollments)")
            // The enrolled node took the name the admin gave the token.
            #expect(try fleet.nodes().contains { $0["name"] as? String == "first" })
        }

        static func agentArguments(_ fleet: FleetHarness, _ name: String) -> [String] {
            [
                "agent", "--coordinator", "127.0.0.1:\(fleet.controlPort)", "--name", name, "--synthetic", "1", "--no-discover",
                "--state-dir", fleet.directory + "/\(name)",
            ]
        }

        @Test func plainConnections_toEveryEndpoint_areRefused() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("member")
            try await fleet.waitUntil("the agent streams", seconds: 20) {
                try fleet.deviceStats().values.contains { ($0["frames_captured"] as? Int ?? 0) > 0 }
            }
            let context = ZMQContext()
            let node = try #require(try fleet.nodes().first?["node_id"] as? String)
            let hello: [UInt8] = try Capfleet_V1_AgentMessage.with {
                $0.hello = .with {
                    $0.protocolVersion = .current; $0.nodeID = node
                }
            }.serializedBytes()
            let request: [UInt8] = try Capfleet_V1_OperatorRequest.with {
                $0.requestID = 1; $0.body = .listNodes(.init())
            }.serializedBytes()
            let control = try ZMQSocket(context: context, type: .dealer)
            try control.connect("tcp://127.0.0.1:\(fleet.controlPort)")
            try control.send(hello, dontWait: true)
            let operatorSocket = try ZMQSocket(context: context, type: .dealer)
            try operatorSocket.connect("tcp://127.0.0.1:\(fleet.operatorPort)")
            try operatorSocket.send(request, dontWait: true)
            let push = try ZMQSocket(context: context, type: .push)
            try push.connect("tcp://127.0.0.1:\(fleet.ingestPort)")
            _ = try push.send(parts: [[1, 2, 3], [4, 5, 6]], dontWait: true)
            let sub = try ZMQSocket(context: context, type: .sub)
            try sub.subscribe("")
            try sub.connect("tcp://127.0.0.1:\(fleet.telemetryPort)")
            // Telemetry flows every second to those who may see it; the plain subscriber gets none.
            #expect(!sub.waitForInput(milliseconds: 2500), "a plain subscriber receives no telemetry")
            #expect(!control.waitForInput(milliseconds: 100) && !operatorSocket.waitForInput(milliseconds: 100), "plain peers get no answer")
            try await fleet.waitUntil("every endpoint counted a refused handshake", seconds: 10) {
                let counted = try Self.rejections(fleet)
                return ["control", "operator", "ingest", "telemetry"].allSatisfy { (counted["\($0)/handshake_failed"] ?? 0) >= 1 }
            }
            let denied = try Self.audit(fleet, "access.denied")
            for endpoint in ["control", "operator", "ingest", "telemetry"] {
                #expect(denied.contains { $0.hasPrefix("access.denied refused \(endpoint) handshake_failed") }, "\(denied)")
            }
            // An operator's key is no use on the agents' endpoints either.
            let misplaced = try fleet.socket(.dealer, port: fleet.controlPort, keys: try fleet.operatorKeys("ana"), context: context)
            try misplaced.send(hello, dontWait: true)
            #expect(!misplaced.waitForInput(milliseconds: 1500))
            #expect((try Self.rejections(fleet)["control/wrong_endpoint"] ?? 0) >= 1)
        }

        @Test func roles_viewersOnlyLook_operatorsCannotEnroll_andEveryRefusalIsAnsweredAndAudited() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("cam")
            try await fleet.waitUntil("the camera is online", seconds: 20) { try fleet.json(["devices"]).contains { $0["online"] as? Bool == true } }
            let device = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)

            try await fleet.waitUntil("the camera streams", seconds: 20) { try fleet.deviceStats()[device]?["frames_captured"] as? Int ?? 0 > 0 }
            // A viewer looks: lists, watch, who am I.
            #expect(try fleet.json(["devices"], user: "vi").count == 1)
            let watched = try fleet.cli(["watch", "--count", "1", "--json"], user: "vi")
            #expect(watched.status == 0 && watched.output.contains(device), "\(watched)")
            #expect(try fleet.cli(["whoami"], user: "vi").output.contains("vi (viewer)"))
            // …and cannot command anything.
            let commands: [[String]] = [
                ["zoom", device, "2"], ["frame-rate", device, "10"], ["preset", device, "low"], ["lock", device],
                ["focus", device, "--mode", "auto"], ["policy", device, "--drop-recovery", "off"],
                ["enroll", "--name", "x"], ["nodes", "revoke", "x"], ["operator", "list"],
            ]
            for command in commands {
                let result = try fleet.cli(command, user: "vi")
                #expect(result.status != 0, "viewer: \(command)")
                #expect(result.error.contains("needs the") && result.error.contains("vi is a viewer"), "\(command): \(result.error)")
            }
            // An operator commands devices but cannot let anyone in.
            #expect(try fleet.cli(["lock", device], user: "bo").status == 0)
            let zoomed = try fleet.cli(["zoom", device, "2"], user: "bo")
            #expect(zoomed.status == 0, "\(zoomed)")
            let enroll = try fleet.cli(["enroll", "--name", "intruder"], user: "bo")
            #expect(enroll.status != 0 && enroll.error.contains("needs the admin role"), "\(enroll.error)")
            #expect(
                try fleet.cli(["operator", "add", "eve", "--role", "admin", "--out", fleet.directory + "/eve.credential"], user: "bo").status != 0)
            // The admin can.
            let token = try fleet.cli(["enroll", "--name", "extra", "--quiet"], user: "ana")
            #expect(token.status == 0 && token.output.hasPrefix(EnrollmentToken.prefix), "\(token.error)")
            #expect(
                try fleet.cli(["operator", "add", "cy", "--role", "viewer", "--out", fleet.directory + "/cy.credential"], user: "ana").status == 0)
            let operators = try fleet.json(["operator", "list"], user: "ana").compactMap { $0["name"] as? String }
            #expect(Set(operators).isSuperset(of: ["ana", "bo", "vi", "cy"]), "\(operators)")
            let cy = try fleet.run([
                "devices", "--coordinator", "127.0.0.1:\(fleet.operatorPort)", "--credential", fleet.directory + "/cy.credential", "--json",
            ])
            #expect(cy.status == 0, "the new viewer's credential works: \(cy.error)")

            let denied = try Self.audit(fleet, "access.denied").filter { $0.contains("forbidden") }
            let everything = try Self.audit(fleet, "")
            #expect(!denied.isEmpty, "\(everything)")
            #expect(denied.count == commands.count + 2, "every refusal audited once: \(denied)")
            #expect(denied.contains { $0.contains("changeZoom") && $0.contains("needs the operator role") })
            #expect(denied.contains { $0.contains("createEnrollment") && $0.contains("needs the admin role") })
        }

        @Test func revokedNode_isDisconnectedWithinASecond_andCannotComeBack() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("doomed")
            try await fleet.waitUntil("the agent streams", seconds: 20) {
                try fleet.deviceStats().values.contains { ($0["frames_captured"] as? Int ?? 0) > 3 }
            }
            let node = try #require(try fleet.nodes().first?["node_id"] as? String)
            // A second connection with the same (stolen) key: revocation must close it too.
            let context = ZMQContext()
            let stolen = try fleet.socket(.dealer, port: fleet.controlPort, keys: try fleet.agentKeys("doomed"), context: context)
            let monitor = try stolen.openMonitor(context: context, events: SocketEvent.handshakeEvents)
            let heartbeat: [UInt8] = try Capfleet_V1_AgentMessage.with {
                $0.heartbeat = .with {
                    $0.nodeID = node; $0.sequence = 1
                }
            }.serializedBytes()
            try stolen.send(heartbeat)
            #expect(stolen.waitForInput(milliseconds: 3000), "the stolen key works before revocation")
            _ = try stolen.receiveMultipart(dontWait: true)
            _ = SocketEvent.drain(monitor)

            let revokedAt = Date()
            let result = try fleet.cli(["nodes", "revoke", "doomed", "--reason", "laptop stolen"])
            #expect(result.status == 0, "\(result.error)")
            try await fleet.waitUntil("the agent stops", seconds: 3) { !agent.isRunning }
            let agentGone = Date().timeIntervalSince(revokedAt)
            var disconnected = false
            let deadline = Date().addingTimeInterval(3)
            while !disconnected && Date() < deadline {
                disconnected = SocketEvent.drain(monitor).contains { $0.event == SocketEvent.disconnected }
                if !disconnected { try await Task.sleep(for: .milliseconds(20)) }
            }
            let connectionGone = Date().timeIntervalSince(revokedAt)
            #expect(agentGone < 1.0 && connectionGone < 1.0, "agent stopped after \(agentGone) s, stolen connection closed after \(connectionGone) s")
            #expect(disconnected)
            #expect(agent.log.contains("laptop stolen"), "the agent says why it stopped: \(agent.log.suffix(500))")
            #expect(agent.process.terminationStatus != 0)

            // The stolen connection was told too, before it was closed…
            var told = false
            while let message = try stolen.receiveMultipart(dontWait: true) {
                if case .revoked? = try Capfleet_V1_CoordinatorMessage(serializedBytes: message.parts[0].array).body { told = true }
            }
            #expect(told, "every connection of the node hears that it was revoked")
            // …and nothing from that key is heard again: the stolen socket reconnects and is refused.
            try stolen.send(heartbeat, dontWait: true)
            #expect(!stolen.waitForInput(milliseconds: 1500))
            let restarted = try fleet.startAgent("doomed")
            try await Task.sleep(for: .seconds(3))
            #expect(restarted.isRunning && restarted.log.contains("refused this node's key"), "\(restarted.log.suffix(600))")
            let nodes = try fleet.nodes()
            #expect(nodes.first?["online"] as? Bool == false && nodes.first?["revoked"] as? Bool == true, "\(nodes)")
            #expect(try fleet.cli(["nodes"]).output.contains("revoked"))
            #expect((try Self.rejections(fleet)["control/revoked_key"] ?? 0) >= 1)
            #expect(try Self.audit(fleet, "node.revoke").first?.contains("laptop stolen") == true)
            let kinds = try fleet.cli(["events", "--json", "--limit", "50"]).output
            #expect(kinds.contains("node_revoked"))
        }
    }
}
