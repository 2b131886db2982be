import FleetBus
import FleetProtocol
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension SecondLaneIntegrationTests {
    /// Hostile and broken peers, sent with raw ZeroMQ sockets (and one raw TCP connection)
    /// while a good agent streams: every bad input is rejected and counted by reason, and the
    /// coordinator keeps serving the good agent throughout. The sockets hold real keys (the
    /// good agent's, as if stolen, and an operator's): without one nothing reaches a decoder.
    @Suite struct MalformedInputTests {
        func header(
            device: String, node: String, payload: UInt64, width: UInt32 = 640, height: UInt32 = 480,
            version: Capfleet_V1_ProtocolVersion = .current
        ) throws -> [UInt8] {
            try Capfleet_V1_FrameHeader.with {
                $0.protocolVersion = version
                $0.nodeID = node
                $0.deviceID = device
                $0.sequence = 1
                $0.layout = .with {
                    $0.pixelFormat = "YUYV"
                    $0.width = width
                    $0.height = height
                    $0.bytesPerLine = width * 2
                }
                $0.payloadSize = payload
            }.serializedBytes()
        }

        @Test func malformedInput_isRejectedCountedAndNeverStopsTheGoodAgents() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("good")
            try await fleet.waitUntil("the good agent registers", seconds: 20) { try fleet.json(["devices"]).count == 1 }
            let device = try #require(try fleet.json(["devices"]).first)
            let deviceID = try #require(device["device_id"] as? String)
            let nodeID = try #require(device["node_id"] as? String)
            let context = ZMQContext()
            // Someone watches the good camera, so its frames come to the coordinator throughout.
            let viewer = try fleet.wantFrames(of: [deviceID], context: context)
            defer { viewer.close() }
            try await fleet.waitUntil("the good agent streams", seconds: 20) {
                (try fleet.deviceStats()[deviceID]?["frames_received"] as? Int ?? 0) > 5
            }
            let framesBefore = try #require(try fleet.deviceStats()[deviceID]?["frames_received"] as? Int)

            // Frame ingest.
            let stolen = try fleet.agentKeys("good")
            let push = try fleet.socket(.push, port: fleet.ingestPort, keys: stolen, context: context)
            let frame = [UInt8](repeating: 0x80, count: 640 * 480 * 2)
            let valid = try header(device: deviceID, node: nodeID, payload: UInt64(frame.count))
            try push.send(parts: [Array("random bytes, one part".utf8)])  // wrong_part_count
            try push.send(parts: [valid, frame, [1, 2, 3]])  // wrong_part_count
            try push.send(parts: [[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], frame])  // undecodable
            try push.send(parts: [Array(valid.prefix(valid.count / 2)), frame])  // undecodable (truncated)
            try push.send(parts: [valid, Array(frame.prefix(1000))])  // payload_size_mismatch
            try push.send(parts: [try header(device: deviceID, node: nodeID, payload: 1000), [UInt8](repeating: 0, count: 1000)])  // format_size_mismatch
            try push.send(parts: [try header(device: deviceID, node: nodeID, payload: 2_000_000_000), frame])  // oversized_claim
            try push.send(parts: [try header(device: "no-such-camera", node: nodeID, payload: UInt64(frame.count)), frame])  // unknown_device
            try push.send(parts: [try header(device: deviceID, node: nodeID, payload: UInt64(frame.count), version: .unspecified), frame])  // incompatible_version
            try push.send(parts: [try header(device: deviceID, node: nodeID, payload: UInt64(frame.count), width: 0), frame])  // invalid_format

            // Control endpoint: every bad message gets an answer with a status.
            let dealer = try fleet.socket(.dealer, port: fleet.controlPort, keys: stolen, context: context)
            let unknownField: [UInt8] = [0xf8, 0x06, 0x01]  // field 111, varint 1: a message from the future
            let strangerHeartbeat: [UInt8] = try Capfleet_V1_AgentMessage.with {
                $0.heartbeat = .with {
                    $0.nodeID = "node-stranger"; $0.sequence = 1
                }
            }.serializedBytes()
            let controlInputs: [[[UInt8]]] = [[[0xff, 0xff, 0xff]], [[1], [2]], [unknownField], [strangerHeartbeat]]
            var controlReplies: [Capfleet_V1_CoordinatorMessage] = []
            for parts in controlInputs {
                try dealer.send(parts: parts)
                #expect(dealer.waitForInput(milliseconds: 3000), "the coordinator answers a bad control message")
                if let reply = try dealer.receiveMultipart(dontWait: true) {
                    controlReplies.append(try Capfleet_V1_CoordinatorMessage(serializedBytes: reply.parts[0].array))
                }
            }
            #expect(controlReplies.count == 4)
            // The last one claims to be another node than the key's: refused as wrong_identity.
            #expect(controlReplies.allSatisfy { if case .error(let status)? = $0.body { status.code == .badRequest } else { false } })

            // Operator endpoint.
            let operatorSocket = try fleet.socket(.dealer, port: fleet.operatorPort, keys: try fleet.operatorKeys("ana"), context: context)
            try operatorSocket.send(parts: [[0xff, 0x00, 0xff]])
            #expect(operatorSocket.waitForInput(milliseconds: 3000))
            let operatorReply = try Capfleet_V1_OperatorReply(
                serializedBytes: try #require(try operatorSocket.receiveMultipart(dontWait: true)).parts[0].array)
            #expect(operatorReply.status.code == .badRequest)

            // A raw TCP peer speaking plain ZMTP whose frame claims 2 GB: it never gets past the
            // greeting (not CURVE), so nothing is allocated for it.
            let claimedGigabytes = try Self.sendZMTPFrameClaiming(bytes: 2_000_000_000, port: fleet.ingestPort)
            #expect(claimedGigabytes, "the coordinator closed the connection that claimed 2 GB")

            let expected: [String: Int] = [
                "ingest/wrong_part_count": 2, "ingest/undecodable": 2, "ingest/payload_size_mismatch": 1,
                "ingest/format_size_mismatch": 1, "ingest/oversized_claim": 1, "ingest/unknown_device": 1,
                "ingest/incompatible_version": 1, "ingest/invalid_format": 1,
                "control/undecodable": 1, "control/wrong_part_count": 1, "control/unknown_message": 1, "control/wrong_identity": 1,
                "operator/undecodable": 1, "ingest/handshake_failed": 1,
            ]
            var counted: [String: Int] = [:]
            try await fleet.waitUntil("every rejection is counted", seconds: 10) {
                counted = Dictionary(
                    uniqueKeysWithValues: try fleet.json(["rejections"]).map {
                        ("\($0["endpoint"]!)/\($0["reason"]!)", $0["count"] as? Int ?? 0)
                    })
                return expected.allSatisfy { counted[$0.key] == $0.value }
            }
            #expect(counted == expected)

            // The good agent kept streaming the whole time, and still does.
            try await fleet.waitUntil("the good agent's frames keep arriving", seconds: 10) {
                (try fleet.deviceStats()[deviceID]?["frames_received"] as? Int ?? 0) > framesBefore + 15
            }
            #expect(try fleet.onlineNodeIDs() == [nodeID])
        }

        /// Speaks just enough ZMTP 3.0 (greeting, NULL READY as a PUSH) to send a frame header
        /// claiming `bytes`, then reports whether the peer closed the connection.
        static func sendZMTPFrameClaiming(bytes: UInt64, port: UInt16) throws -> Bool {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = port.bigEndian
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            guard connected else { throw HarnessError("cannot connect to the ingest port \(port)") }
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))

            var greeting: [UInt8] = [0xff] + [UInt8](repeating: 0, count: 8) + [0x7f, 3, 0]
            greeting += Array("NULL".utf8) + [UInt8](repeating: 0, count: 16) + [0] + [UInt8](repeating: 0, count: 31)
            let property = [UInt8(11)] + Array("Socket-Type".utf8) + [0, 0, 0, 4] + Array("PUSH".utf8)
            let readyBody = [UInt8(5)] + Array("READY".utf8) + property
            let ready = [UInt8(0x04), UInt8(readyBody.count)] + readyBody
            var size = bytes.bigEndian
            let longFrame = [UInt8(0x02)] + withUnsafeBytes(of: &size) { Array($0) } + [UInt8](repeating: 0x41, count: 1024)
            for chunk in [greeting, ready, longFrame] {
                _ = chunk.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
            // Read until the coordinator closes the connection (0) or the timeout (-1).
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count == 0 { return true }
                if count < 0 { return errno == ECONNRESET }
            }
        }
    }
}
