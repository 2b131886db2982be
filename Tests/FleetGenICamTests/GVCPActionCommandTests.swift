import FleetGenICam
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// GigE Vision action commands: the datagram byte for byte as the standard lays it out, and a
/// real UDP exchange on loopback with a peer that answers as a camera does.
@Suite struct GVCPActionCommandTests {
    @Test func aScheduledActionCommand_isTheStandardsDatagram_andReadsBack() {
        let command = GVCPActionCommand(
            deviceKey: 0x1234_5678, groupKey: 0x0000_0001, groupMask: 0xFFFF_FFFF, actionTime: 1_795_957_660_200_000_000, acknowledge: true,
            requestID: 0x0102)
        let bytes = command.encoded
        #expect(bytes.count == 28)
        // Header: key code, flags (action time present, acknowledge), ACTION_CMD, length 20, req_id.
        #expect(Array(bytes[0..<8]) == [0x42, 0x81, 0x01, 0x00, 0x00, 0x14, 0x01, 0x02])
        #expect(Array(bytes[8..<20]) == [0x12, 0x34, 0x56, 0x78, 0x00, 0x00, 0x00, 0x01, 0xFF, 0xFF, 0xFF, 0xFF])
        // 1795957660200000000 = 0x18EC_85F9_FFDC_DA00, big-endian.
        #expect(Array(bytes[20..<28]) == [0x18, 0xEC, 0x85, 0xF9, 0xFF, 0xDC, 0xDA, 0x00])
        #expect(GVCPActionCommand(decoding: bytes) == command)
    }

    @Test func anImmediateActionCommand_hasNoActionTime_andAMalformedOneIsRefused() {
        let command = GVCPActionCommand(deviceKey: 1, groupKey: 2, groupMask: 4, acknowledge: false, requestID: 7)
        let bytes = command.encoded
        #expect(bytes == [0x42, 0x00, 0x01, 0x00, 0x00, 0x0C, 0x00, 0x07, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 4])
        #expect(GVCPActionCommand(decoding: bytes) == command)
        #expect(GVCPActionCommand(decoding: Array(bytes.dropLast())) == nil, "short")
        var wrongCommand = bytes
        wrongCommand[3] = 0x82  // WRITEREG_CMD
        #expect(GVCPActionCommand(decoding: wrongCommand) == nil)
        var flagged = bytes
        flagged[1] = 0x80  // says an action time follows, but the length says none
        #expect(GVCPActionCommand(decoding: flagged) == nil)
        let ack = GVCPActionCommand.acknowledgement(requestID: 7, status: 0x8013)
        #expect(ack == [0x80, 0x13, 0x01, 0x01, 0x00, 0x00, 0x00, 0x07])
        #expect(GVCPActionCommand.Acknowledgement(decoding: ack) == GVCPActionCommand.Acknowledgement(decoding: ack))
        #expect(GVCPActionCommand.Acknowledgement(decoding: ack)?.status == 0x8013)
    }

    /// Two "cameras" on loopback UDP sockets (one bound port, as cameras on one subnet share
    /// GVCP's): each reads the command and acknowledges it; the sender gathers both answers.
    @Test func theSender_deliversTheDatagram_andGathersEachCamerasAcknowledgement() throws {
        let camera = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        try #require(camera >= 0)
        defer { close(camera) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(camera, $0, length) == 0 && getsockname(camera, $0, &length) == 0 }
        }
        try #require(bound)
        let port = UInt16(bigEndian: address.sin_port)
        let received = LockedBox<[UInt8]>([])
        let answering = Thread {
            var buffer = [UInt8](repeating: 0, count: 64)
            var from = sockaddr_in()
            var fromLength = socklen_t(MemoryLayout<sockaddr_in>.size)
            let count = withUnsafeMutablePointer(to: &from) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(camera, &buffer, buffer.count, 0, $0, &fromLength) }
            }
            guard count > 0, let command = GVCPActionCommand(decoding: Array(buffer[0..<count])) else { return }
            received.set(Array(buffer[0..<count]))
            // Two cameras answer, and one stray datagram for another request is ignored.
            for (requestID, status) in [(command.requestID, UInt16(0)), (command.requestID &+ 1, 0), (command.requestID, 0x8013)] {
                let ack = GVCPActionCommand.acknowledgement(requestID: requestID, status: status)
                _ = withUnsafePointer(to: &from) { pointer in
                    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(camera, ack, ack.count, 0, $0, fromLength) }
                }
            }
        }
        answering.start()
        let sender = try GVCPActionSender(destination: "127.0.0.1", port: port)
        let command = GVCPActionCommand(deviceKey: 9, groupKey: 1, groupMask: 1, actionTime: 5_000_000_000, requestID: 41)
        let answers = try sender.send(command, timeout: .milliseconds(500))
        #expect(received.value == command.encoded, "the camera got the datagram as encoded")
        #expect(answers.map(\.requestID) == [41, 41] && answers.map(\.status) == [0, 0x8013], "\(answers)")
    }
}

/// A value shared with the answering thread.
final class LockedBox<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value { lock.withLock { stored } }
    func set(_ value: Value) { lock.withLock { stored = value } }
}
