import FleetBus
import FleetCapture
import FleetCore
import FleetProtocol
import Foundation
import Logging
import Testing

@testable import FleetAgent

/// The publisher's preview slot on real sockets: a PULL socket stands for the coordinator's
/// ingest, CURVE as in the fleet. Before it is connected nothing can leave (ZMQ_IMMEDIATE),
/// so what waits when it connects, and in which order it arrives, is certain.
@Suite struct FramePublisherPreviewTests {
    static func frame(sequence: UInt64) -> CapturedFrame {
        let layout = FrameLayout(pixelFormat: .yuyv, width: 64, height: 48, bytesPerLine: 128)
        let buffer = FrameBuffer(unpooledCapacity: 64 * 48 * 2)
        return CapturedFrame(buffer: buffer, byteCount: 64 * 48 * 2, sequence: sequence, captureMonotonicNanoseconds: sequence * 1000, layout: layout)
    }

    static func previewHeader(device: String, sequence: UInt64, jpeg: [UInt8]) -> Capfleet_V1_FrameHeader {
        .with {
            $0.protocolVersion = .current
            $0.deviceID = device
            $0.sequence = sequence
            $0.layout = .with {
                $0.pixelFormat = "JPEG"; $0.width = 32; $0.height = 24
            }
            $0.payloadSize = UInt64(jpeg.count)
            $0.flags = UInt32(Capfleet_V1_FrameFlag.preview.rawValue)
        }
    }

    @Test func previewsWaitingBesideAFullQueue_goOutFirst_newestPerDevice_andNeverCountAsLateFrames() throws {
        let coordinatorKeys = try CurveKeyPair.generate(), agentKeys = try CurveKeyPair.generate()
        let context = ZMQContext()
        let publisher = try FramePublisher(
            context: context, capacity: 4, coordinatorKey: coordinatorKeys.publicKey, keys: agentKeys,
            logger: Logger(label: "capfleet.test"))
        defer { publisher.stop() }
        let camera = DeviceStatistics(deviceID: "cam-a", outOfBuffers: { 0 }), other = DeviceStatistics(deviceID: "cam-b", outOfBuffers: { 0 })
        let jpeg = BlackJPEG.encode(width: 32, height: 24)

        // Nowhere to send yet: 20 frames (16 of them dropped as late) and three previews.
        for sequence in 1...10 {
            publisher.submit(
                Self.frame(sequence: UInt64(sequence)),
                header: .with {
                    $0.deviceID = "cam-a"; $0.sequence = UInt64(sequence)
                }, statistics: camera)
        }
        publisher.submitPreview(header: Self.previewHeader(device: "cam-a", sequence: 5, jpeg: jpeg), jpeg: jpeg, statistics: camera)
        for sequence in 11...20 {
            publisher.submit(
                Self.frame(sequence: UInt64(sequence)),
                header: .with {
                    $0.deviceID = "cam-a"; $0.sequence = UInt64(sequence)
                }, statistics: camera)
        }
        publisher.submitPreview(header: Self.previewHeader(device: "cam-a", sequence: 15, jpeg: jpeg), jpeg: jpeg, statistics: camera)
        publisher.submitPreview(header: Self.previewHeader(device: "cam-b", sequence: 3, jpeg: jpeg), jpeg: jpeg, statistics: other)

        let pull = try ZMQSocket(context: context, type: .pull)
        defer { pull.close() }
        try pull.makeCurveServer(keys: coordinatorKeys, domain: "test")
        try pull.bind("tcp://127.0.0.1:*")
        publisher.connect(to: try pull.lastEndpoint())

        var received: [(preview: Bool, device: String, sequence: UInt64, bytes: Int)] = []
        let deadline = Date().addingTimeInterval(10)
        while received.count < 6, Date() < deadline {
            guard pull.waitForInput(milliseconds: 100), let message = try pull.receiveMultipart(dontWait: true) else { continue }
            let header = try Capfleet_V1_FrameHeader(serializedBytes: message.parts[0].array)
            received.append((header.isPreview, header.deviceID, header.sequence, message.parts[1].count))
        }
        let order = received.map { "\($0.preview ? "preview" : "frame") \($0.device) \($0.sequence)" }
        #expect(order == ["preview cam-a 15", "preview cam-b 3", "frame cam-a 17", "frame cam-a 18", "frame cam-a 19", "frame cam-a 20"], "\(order)")
        #expect(received.first?.bytes == jpeg.count)
        #expect(
            camera.previewsSent.load(ordering: .relaxed) == 1 && camera.previewsSkipped.load(ordering: .relaxed) == 1,
            "cam-a's first preview was replaced by its newer one")
        // The publisher counts a frame sent once libzmq took it, which may be after it arrived here.
        let counted = Date().addingTimeInterval(2)
        while camera.framesSent.load(ordering: .relaxed) < 4, Date() < counted { Thread.sleep(forTimeInterval: 0.01) }
        #expect(
            camera.late.load(ordering: .relaxed) == 16 && camera.framesSent.load(ordering: .relaxed) == 4,
            "previews are neither frames nor drops")
        #expect(other.previewsSent.load(ordering: .relaxed) == 1)
    }
}
