import FleetProtocol
import Foundation
import Testing

/// The byte examples in proto-docs are part of the contract: they must decode to exactly
/// the values the documents promise.
@Suite struct WorkedExampleTests {
    static let protoDocs = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("proto-docs")

    /// The hex block that follows `<!-- worked-example: NAME -->` in `document`.
    static func example(_ name: String, in document: String) throws -> [UInt8] {
        let text = try String(contentsOf: protoDocs.appendingPathComponent(document), encoding: .utf8)
        let marker = "<!-- worked-example: \(name) -->"
        guard let start = text.range(of: marker) else { throw ExampleError("\(document) has no \(marker)") }
        let rest = text[start.upperBound...]
        guard let open = rest.range(of: "```hex\n"), let close = rest[open.upperBound...].range(of: "```") else {
            throw ExampleError("\(document): no ```hex block after \(marker)")
        }
        return try rest[open.upperBound..<close.lowerBound].split(whereSeparator: \.isWhitespace).map { token in
            guard let byte = UInt8(token, radix: 16) else { throw ExampleError("\(document): `\(token)` is not a hex byte") }
            return byte
        }
    }

    struct ExampleError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    @Test func framesDocument_frameHeaderExampleDecodes() throws {
        let header = try Capfleet_V1_FrameHeader(serializedBytes: try Self.example("FrameHeader", in: "frames.md"))
        #expect(header.protocolVersion == .current)
        #expect(header.nodeID == "node-7f3a")
        #expect(header.deviceID == "syn-7f3a-1")
        #expect(header.sequence == 42)
        #expect(header.captureMonotonicNs == 1_000_000_000)
        #expect(
            header.layout
                == .with {
                    $0.pixelFormat = "YUYV"; $0.width = 640; $0.height = 480; $0.bytesPerLine = 1280
                })
        #expect(header.payloadSize == 614_400)
        #expect(header.flags == UInt32(Capfleet_V1_FrameFlag.synthetic.rawValue))
        #expect(header.consent == .notDetermined)
        #expect(header.drops == .with { $0.late = 2 })
    }

    @Test func telemetryDocument_deviceStatusExampleDecodes() throws {
        let status = try Capfleet_V1_DeviceStatus(serializedBytes: try Self.example("DeviceStatus", in: "telemetry.md"))
        #expect(status.deviceID == "syn-7f3a-1" && status.nodeID == "node-7f3a")
        #expect(status.online && status.streaming)
        #expect(status.framesReceived == 300 && status.bytesReceived == 184_320_000)
        #expect(status.framesPerSecond == 15)
        #expect(status.pixelFormat == "YUYV" && status.width == 640 && status.height == 480)
    }

    @Test func registrationDocument_heartbeatExampleDecodes() throws {
        let message = try Capfleet_V1_AgentMessage(serializedBytes: try Self.example("AgentMessage.Heartbeat", in: "registration.md"))
        guard case let .heartbeat(heartbeat)? = message.body else {
            Issue.record("the example is not a heartbeat")
            return
        }
        #expect(heartbeat.nodeID == "node-7f3a" && heartbeat.sequence == 7 && heartbeat.monotonicNs == 5_000_000_000)
    }

    @Test func deviceEventsDocument_deviceEventExampleDecodesAndReencodes() throws {
        let bytes = try Self.example("AgentMessage.DeviceEvent", in: "device-events.md")
        let message = try Capfleet_V1_AgentMessage(serializedBytes: bytes)
        guard case let .deviceEvent(event)? = message.body else {
            Issue.record("the example is not a device event")
            return
        }
        #expect(event.deviceID == "v4l2-usb-Acme_C1_0042-video-index0")
        #expect(event.kind == .resumed && event.message == "capture resumed by itself" && event.unixMs == 1_795_305_600_000)
        #expect(try message.serializedBytes() == bytes)
    }

    @Test func telemetryDocument_pressureReportExampleDecodesAndReencodes() throws {
        let bytes = try Self.example("PressureReport", in: "telemetry.md")
        let report = try Capfleet_V1_PressureReport(serializedBytes: bytes)
        #expect(report.nodeID == "node-7f3a" && report.level == .serious)
        #expect(
            report.factors == [
                .with {
                    $0.factor = "cpu"; $0.level = .serious
                }
            ])
        #expect(report.hasCpuStallPercent && report.cpuStallPercent == 45)
        #expect(!report.hasMemoryStallPercent, "an absent reading stays absent")
        #expect(try report.serializedBytes() == bytes)
    }

    @Test func examples_areWhatThisVersionEncodes() throws {
        // Encoding the documented values gives the documented bytes: the docs and the code agree.
        let header = try Capfleet_V1_FrameHeader(serializedBytes: try Self.example("FrameHeader", in: "frames.md"))
        let bytes: [UInt8] = try header.serializedBytes()
        #expect(bytes == (try Self.example("FrameHeader", in: "frames.md")))
    }
}
