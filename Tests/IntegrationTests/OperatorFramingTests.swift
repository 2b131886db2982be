import FleetBus
import FleetProtocol
import Foundation
import Testing

extension SecondLaneIntegrationTests {
    /// The operator endpoint answers a REQ socket (an empty delimiter before the request) in the
    /// envelope the request came in, as it answers the CLI's DEALER (operator.md, "Framing"):
    /// a real REQ socket from Swift, and the Python example a third party would start from.
    @Suite struct OperatorFramingTests {
        static func request(_ id: UInt64, _ body: Capfleet_V1_OperatorRequest.OneOf_Body) throws -> [UInt8] {
            try Capfleet_V1_OperatorRequest.with {
                $0.requestID = id; $0.body = body
            }.serializedBytes()
        }

        static func reply(on socket: ZMQSocket) throws -> (parts: [[UInt8]], reply: Capfleet_V1_OperatorReply?) {
            guard socket.waitForInput(milliseconds: 5000), let received = try socket.receiveMultipart(dontWait: true) else {
                throw HarnessError("no reply within 5 s")
            }
            let parts = received.parts.map(\.array)
            let body = parts.first { !$0.isEmpty }
            return (parts, try body.map { try Capfleet_V1_OperatorReply(serializedBytes: $0) })
        }

        @Test func aReqSocket_isAnsweredInItsEnvelope_andMalformedDelimitedInputIsRefusedAndCounted() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("framed")
            try await fleet.waitUntil("the agent streams", seconds: 20) {
                try fleet.deviceStats().values.contains { ($0["frames_captured"] as? Int ?? 0) > 0 }
            }
            let deviceID = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            let context = ZMQContext()

            // A real REQ socket: libzmq adds and removes the delimiter; two requests in turn.
            let req = try fleet.socket(.req, port: fleet.operatorPort, keys: try fleet.operatorKeys("vi"), context: context)
            try req.send(parts: [try Self.request(7, .whoAmI(.init()))])
            let who = try Self.reply(on: req)
            #expect(who.parts.count == 1, "the REQ socket strips the delimiter: \(who.parts.map(\.count))")
            #expect(who.reply?.requestID == 7 && who.reply?.status.code == .ok && who.reply?.you.name == "vi", "\(String(describing: who.reply))")
            // A frame's payload follows the reply behind the same delimiter.
            try req.send(parts: [try Self.request(8, .getLatestFrame(.with { $0.deviceID = deviceID }))])
            let frame = try Self.reply(on: req)
            #expect(frame.reply?.status.code == .ok, "\(String(describing: frame.reply?.status))")
            let header = try #require(frame.reply?.frameHeader)
            #expect(frame.parts.count == 2 && UInt64(frame.parts[1].count) == header.payloadSize, "reply and payload: \(frame.parts.map(\.count))")
            req.close()

            // A DEALER speaking REQ's framing sees the delimiter come back, also with a refusal.
            let dealer = try fleet.socket(.dealer, port: fleet.operatorPort, keys: try fleet.operatorKeys("vi"), context: context)
            try dealer.send(parts: [[], try Self.request(9, .listNodes(.init()))])
            let listed = try Self.reply(on: dealer)
            #expect(listed.parts.first == [] && listed.parts.count == 2 && listed.reply?.nodes.count == 1, "\(listed.parts.map(\.count))")
            try dealer.send(parts: [[], try Self.request(10, .listNodes(.init())), [1, 2, 3]])
            let refused = try Self.reply(on: dealer)
            #expect(refused.parts.first == [] && refused.reply?.status.code == .badRequest, "\(String(describing: refused.reply?.status))")
            #expect(
                refused.reply?.status.reason.contains("REQ") == true, "the reason says how to frame a request: \(refused.reply?.status.reason ?? "")")
            // The one-part framing of a DEALER is as it was.
            try dealer.send(parts: [try Self.request(11, .whoAmI(.init()))])
            let bare = try Self.reply(on: dealer)
            #expect(bare.parts.count == 1 && bare.reply?.requestID == 11 && bare.reply?.status.code == .ok)
            dealer.close()

            var counted: [String: Int] = [:]
            try await fleet.waitUntil("the malformed message is counted", seconds: 10) {
                counted = Dictionary(
                    uniqueKeysWithValues: try fleet.json(["rejections"]).map {
                        ("\($0["endpoint"]!)/\($0["reason"]!)", $0["count"] as? Int ?? 0)
                    })
                return counted["operator/wrong_part_count"] == 1
            }
            #expect(counted.filter { $0.key.hasPrefix("operator/") } == ["operator/wrong_part_count": 1], "only the malformed message: \(counted)")
        }

        /// operator_request.py, from proto-docs/examples: pyzmq's REQ socket, the credential and
        /// the .proto files, nothing of CaptureFleet's code.
        @Test func thePythonReqExample_asksWhoItIs_listsDevices_andHearsARefusal() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("asked")
            try await fleet.waitUntil("the agent registers", seconds: 20) { try fleet.json(["devices"]).count == 1 }
            let base = ["--coordinator", "127.0.0.1:\(fleet.operatorPort)", "--credential", try fleet.credential(for: "vi")]
            func ask(_ request: String) throws -> (status: Int32, reply: [String: Any], error: String) {
                let run = try ThirdPartyClientTests.runPython("operator_request.py", base + ["--request", request])
                let reply = try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any] ?? [:]
                return (run.status, reply, run.error)
            }
            let who = try ask("{\"who_am_i\": {}}")
            #expect(who.status == 0, "\(who.error)")
            #expect((who.reply["you"] as? [String: Any])?["name"] as? String == "vi", "\(who.reply)")
            #expect((who.reply["endpoints"] as? [String: Any])?["telemetry_port"] as? Int == Int(fleet.telemetryPort), "\(who.reply)")

            let devices = try ask("{\"list_devices\": {\"with_formats\": true}}")
            #expect(devices.status == 0, "\(devices.error)")
            let listed = try #require(devices.reply["devices"] as? [[String: Any]])
            #expect(listed.count == 1 && !(listed[0]["formats"] as? [Any] ?? []).isEmpty, "\(listed)")

            // A viewer may not change a format: the refusal reaches the REQ socket too.
            let deviceID = try #require(listed[0]["device_id"] as? String)
            let refused = try ask("{\"change_format\": {\"device_id\": \"\(deviceID)\", \"preset\": \"low\"}}")
            #expect(refused.status == 2, "\(refused.error)")
            let status = try #require(refused.reply["status"] as? [String: Any])
            #expect(
                status["code"] as? String == "STATUS_CODE_PERMISSION_DENIED" && refused.reply["needed_role"] as? String == "OPERATOR_ROLE_OPERATOR",
                "\(refused.reply)")

            let stats = try ask("{\"get_ingest_stats\": {}}")
            let rejections = stats.reply["rejections"] as? [[String: Any]] ?? []
            #expect(
                !rejections.contains { $0["endpoint"] as? String == "operator" && $0["reason"] as? String != "forbidden" },
                "REQ framing is not malformed input: \(rejections)")
        }
    }
}
