import FleetProtocol
import Testing

@Suite struct WireContractTests {
    @Test func topics_followTheDocumentedPrefixes() {
        #expect(TelemetryTopic.node("node-1") == "node.node-1")
        #expect(TelemetryTopic.device("syn-1") == "device.syn-1")
        #expect(TelemetryTopic.drops("syn-1") == "drops.syn-1")
        #expect(TelemetryTopic.event(.nodeOffline) == "event.node_offline")
        #expect(TelemetryTopic.event(.inputRejected) == "event.input_rejected")
    }

    @Test func frameHeader_roundTripsEveryField() throws {
        let header = Capfleet_V1_FrameHeader.with {
            $0.protocolVersion = .current
            $0.nodeID = "node-7f3a"
            $0.deviceID = "syn-7f3a-1"
            $0.sequence = 42
            $0.captureMonotonicNs = 1_000_000_000
            $0.fleetTimeNs = 5
            $0.layout = .with {
                $0.pixelFormat = "YUYV"; $0.width = 640; $0.height = 480; $0.bytesPerLine = 1280
            }
            $0.payloadSize = 614_400
            $0.flags = UInt32(Capfleet_V1_FrameFlag.synthetic.rawValue | Capfleet_V1_FrameFlag.recording.rawValue)
            $0.consent = .authorized
            $0.drops = .with {
                $0.late = 2; $0.outOfBuffers = 1; $0.discontinuity = 3
            }
        }
        let bytes: [UInt8] = try header.serializedBytes()
        #expect(try Capfleet_V1_FrameHeader(serializedBytes: bytes) == header)
    }

    @Test func unknownFields_fromANewerPeer_doNotBreakDecoding() throws {
        // Field 111 (varint) is unknown to this version: a newer agent's addition.
        let message = try Capfleet_V1_AgentMessage(serializedBytes: [0xf8, 0x06, 0x01])
        #expect(message.body == nil)
    }

    @Test func statusFactory_carriesCodeAndReason() {
        let status = Capfleet_V1_Status.failure(.notFound, "no device cam-9")
        #expect(!status.isOK && status.code == .notFound && status.reason == "no device cam-9")
        #expect(Capfleet_V1_Status.ok.isOK)
    }
}
