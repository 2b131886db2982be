import FleetBus
import FleetClient
import FleetProtocol
import Foundation
import Synchronization
import Testing

/// The operator client against a hand-made coordinator: a CURVE ROUTER on 127.0.0.1 that holds
/// requests until they stop coming, then answers them last first.
@Suite(.timeLimit(.minutes(1))) struct OperatorClientTests {
    /// Answers `get_formats` for device "cam-N" with one format N pixels wide, and refuses
    /// device "forbidden"; notes the most requests it ever held unanswered.
    final class ReversingCoordinator: Sendable {
        let keys = try! CurveKeyPair.generate()
        let port = Mutex<UInt16>(0)
        let mostHeld = Mutex(0)
        private let stopping = Atomic<Bool>(false)
        private let bound = DispatchSemaphore(value: 0)

        init() {
            Thread.detachNewThread { [self] in
                let socket = try! ZMQSocket(context: ZMQContext(), type: .router)
                try! socket.makeCurveServer(keys: keys, domain: "test")
                try! socket.bind("tcp://127.0.0.1:*")
                port.withLock { $0 = UInt16(try! socket.lastEndpoint().split(separator: ":").last.map(String.init) ?? "0") ?? 0 }
                bound.signal()
                var held: [(routing: [UInt8], request: Capfleet_V1_OperatorRequest)] = []
                while !self.stopping.load(ordering: .relaxed) {
                    // Everything that comes within 50 ms of the last request is held, then answered in reverse.
                    if socket.waitForInput(milliseconds: 50) {
                        while let received = try? socket.receiveMultipart(dontWait: true), received.parts.count == 2 {
                            held.append((received.parts[0].array, try! Capfleet_V1_OperatorRequest(serializedBytes: received.parts[1].array)))
                        }
                        mostHeld.withLock { $0 = max($0, held.count) }
                        continue
                    }
                    for (routing, request) in held.reversed() {
                        let reply = Capfleet_V1_OperatorReply.with {
                            $0.requestID = request.requestID
                            let device = request.getFormats.deviceID
                            if device == "forbidden" {
                                $0.status = .failure(.permissionDenied, "not this one")
                            } else {
                                $0.status = .ok
                                $0.formats = [.with { $0.width = UInt32(device.dropFirst(4)) ?? 0 }]
                            }
                        }
                        _ = try? socket.send(parts: [routing, try! reply.serializedBytes()])
                    }
                    held.removeAll()
                }
                socket.close()
            }
            bound.wait()
        }

        func client() throws -> OperatorClient {
            let credential = OperatorCredential(
                name: "tester", role: "viewer", keys: try CurveKeyPair.generate(), coordinatorKey: keys.publicKey,
                coordinator: nil)
            return try OperatorClient(address: CoordinatorAddress(host: "127.0.0.1", port: port.withLock { $0 }), credential: credential, timeout: 10)
        }

        func stop() { stopping.store(true, ordering: .relaxed) }
    }

    static func formats(of device: String) -> Capfleet_V1_OperatorRequest.OneOf_Body {
        .getFormats(.with { $0.deviceID = device })
    }

    @Test func callEach_returnsTheRepliesInTheOrderAsked_withAtMostTheWindowInFlight() throws {
        let coordinator = ReversingCoordinator()
        defer { coordinator.stop() }
        let client = try coordinator.client()
        let replies = try client.callEach((1...40).map { Self.formats(of: "cam-\($0)") }, window: 8)
        #expect(replies.map { $0.formats.first?.width ?? 0 } == Array(1...40))
        let mostHeld = coordinator.mostHeld.withLock { $0 }
        #expect(mostHeld > 1 && mostHeld <= 8, "requests in flight at once: \(mostHeld)")
        // The connection goes on serving single calls afterwards.
        #expect(try client.call(Self.formats(of: "cam-7")).reply.formats.first?.width == 7)
    }

    @Test func callEach_throwsARefusal() throws {
        let coordinator = ReversingCoordinator()
        defer { coordinator.stop() }
        let client = try coordinator.client()
        #expect(throws: OperatorClientError.self) {
            try client.callEach(["cam-1", "forbidden", "cam-3"].map(Self.formats(of:)), window: 2)
        }
    }
}
