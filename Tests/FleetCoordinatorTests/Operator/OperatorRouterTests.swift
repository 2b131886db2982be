import FleetBus
import FleetCore
import FleetProtocol
import FleetSystem
import Foundation
import Logging
import Synchronization
import Testing

@testable import FleetCoordinator
@testable import FleetStore

/// The operator door on a real CURVE endpoint on 127.0.0.1: requests a test client sends,
/// admitted by a ZAP handler as the principal the test chooses, answered by the router over
/// the bed's handlers. Every refusal is answered with a status and a reason, and counted.
@Suite(.timeLimit(.minutes(1))) struct OperatorRouterTests {
    @Test func undecodableBytes_areABadRequest_countedAsUndecodable() async throws {
        let door = try await OperatorDoor()
        let ana = try door.admit(as: Principal.operator(name: "ana").userID)
        let parts = try await door.ask([[0xff, 0x01, 0x02, 0x03]], keys: ana)
        let reply = try Capfleet_V1_OperatorReply(serializedBytes: try #require(parts.first))
        #expect(reply.status.code == .badRequest)
        #expect(reply.status.reason == "not an OperatorRequest; is the CLI the same version as the coordinator?")
        #expect(door.count("operator", "undecodable") == 1)
        await door.close()
    }

    @Test func aConnectionThatIsNoOperators_isRefusedWithItsRequestID_countedAsWrongIdentity() async throws {
        let door = try await OperatorDoor()
        let node = try door.admit(as: Principal.node(id: "node-a", key: "somekey").userID)
        let reply = try await door.request(.with { $0.listNodes = .init() }, id: 7, keys: node)
        #expect(reply.requestID == 7)
        #expect(reply.status.code == .permissionDenied)
        #expect(reply.status.reason == "this connection is not an operator's")
        #expect(reply.nodes.isEmpty)
        #expect(door.count("operator", "wrong_identity") == 1)
        await door.close()
    }

    @Test func aViewerAskingForAChange_isRefusedWithTheRoleNeeded_countedAndAudited() async throws {
        let door = try await OperatorDoor()
        let vic = try door.admit(as: Principal.operator(name: "vic").userID)
        let reply = try await door.request(
            .with {
                $0.changeZoom = .with {
                    $0.deviceID = "cam-1"
                    $0.factor = 2
                }
            }, id: 8, keys: vic)
        #expect(reply.status.code == .permissionDenied)
        #expect(reply.status.reason == "changeZoom needs the operator role; vic is a viewer")
        #expect(reply.neededRole == .operator)
        #expect(door.count("operator", "forbidden") == 1)
        let audit = try await door.bed.audit("access.denied")
        #expect(audit.map(\.actor) == ["vic"])
        #expect(audit.map(\.target) == ["changeZoom"])
        #expect(await door.bed.agents.sent(to: "cam-1").isEmpty)
        await door.close()
    }

    @Test func anOperatorsRequest_isDispatchedByTopic_andAREQSocketsDelimiterComesBack() async throws {
        let door = try await OperatorDoor()
        let ana = try door.admit(as: Principal.operator(name: "ana").userID)
        let listed = try await door.request(.with { $0.listNodes = .init() }, id: 9, keys: ana)
        #expect(listed.status.code == .ok)
        #expect(listed.nodes.map(\.nodeID) == ["node-a"])

        let request =
            try Capfleet_V1_OperatorRequest.with {
                $0.requestID = 10
                $0.whoAmI = .init()
            }.serializedBytes() as [UInt8]
        let parts = try await door.ask([[], request], keys: ana)
        #expect(parts.count == 2)
        #expect(parts.first == [])
        let me = try Capfleet_V1_OperatorReply(serializedBytes: parts[1])
        #expect(me.you.name == "ana")
        #expect(me.you.role == .admin)
        await door.close()
    }

    @Test func theDashboardsRequests_passTheSameRoleCheck_auditedAsViaDashboard() async throws {
        let door = try await OperatorDoor()
        let caller = OperatorCaller(name: "vic", channel: .dashboard, peer: "192.0.2.7")
        let (refused, payload) = await door.router.answer(
            .with { $0.lockDevice = .with { $0.deviceID = "cam-1" } }, from: caller)
        #expect(payload == nil)
        #expect(refused.status.code == .permissionDenied)
        #expect(door.count("dashboard", "forbidden") == 1)
        #expect(try await door.bed.audit("access.denied").map(\.actor) == ["vic via dashboard"])
        #expect(await door.bed.leases.lease(of: "cam-1") == nil)

        let (empty, _) = await door.router.answer(.init(), from: OperatorCaller(name: "ana", channel: .dashboard, peer: "192.0.2.7"))
        #expect(empty.status.code == .badRequest)
        #expect(empty.status.reason == "the request carries no body this coordinator knows; is the CLI newer than the coordinator?")
        #expect(door.count("dashboard", "unknown_message") == 1)

        let (removed, _) = await door.router.answer(
            .with { $0.listNodes = .init() }, from: OperatorCaller(name: "gone", channel: .operatorEndpoint, peer: "192.0.2.8"))
        #expect(removed.status.code == .permissionDenied)
        #expect(removed.status.reason == "operator gone was removed")
        await door.close()
    }
}

/// The bed's handlers behind a real operator endpoint, with a ZAP handler that admits the
/// keys the test made as the principals it chose.
struct OperatorDoor {
    let bed: OperatorBed
    let router: OperatorRouter
    private let context = ZMQContext()
    private let endpoint: RouterEndpoint
    private let zap: ZAPHandler
    private let admitted = Admissions()
    private let serving: Task<Void, Never>

    init() async throws {
        bed = try await OperatorBed()
        let admitted = self.admitted
        zap = try ZAPHandler(context: context) { request in
            guard let key = request.clientKey, let userID = admitted.keys.withLock({ $0[key.z85] }) else { return .deny(reason: "unknown key") }
            return .allow(userID: userID)
        }
        endpoint = try RouterEndpoint(
            name: "operator", context: context, bind: "tcp://127.0.0.1:*", maxMessageBytes: 1 << 20,
            security: CurveServerSecurity(keys: bed.keys, domain: "operator") { _, _ in })
        let logger = Logger(label: "capfleet.test.door")
        router = OperatorRouter(
            endpoint: endpoint,
            authorization: OperatorAuthorization(store: bed.store, rejections: bed.rejections, clock: bed.clock, logger: logger),
            leases: bed.leases, rejections: bed.rejections, handlers: bed.handlers, logger: logger)
        let router = self.router
        serving = Task { await router.serve() }
    }

    func close() async {
        serving.cancel()
        endpoint.stop()
        zap.stop()
        await bed.close()
    }

    /// A new client key the ZAP handler admits as `userID`.
    func admit(as userID: String) throws -> CurveKeyPair {
        let keys = try CurveKeyPair.generate()
        admitted.keys.withLock { $0[keys.publicKey.z85] = userID }
        return keys
    }

    /// How many of `endpoint`'s inputs were rejected for `reason`.
    func count(_ endpoint: String, _ reason: String) -> UInt64 {
        bed.rejections.counts.first { $0.endpoint == endpoint && $0.reason == reason }?.count ?? 0
    }

    func request(_ request: Capfleet_V1_OperatorRequest, id: UInt64, keys: CurveKeyPair) async throws -> Capfleet_V1_OperatorReply {
        var request = request
        request.requestID = id
        let parts = try await ask([try request.serializedBytes()], keys: keys)
        return try Capfleet_V1_OperatorReply(serializedBytes: try #require(parts.first))
    }

    /// Sends `parts` from a DEALER with `keys` and returns the reply's parts; the socket lives
    /// and dies on a thread of its own.
    func ask(_ parts: [[UInt8]], keys: CurveKeyPair) async throws -> [[UInt8]] {
        let endpoint = self.endpoint.boundEndpoint
        let serverKey = bed.keys.publicKey
        return try await OwnedThread.run("cf-test-operator") { () throws -> [[UInt8]] in
            let context = ZMQContext()
            let socket = try ZMQSocket(context: context, type: .dealer)
            try socket.makeCurveClient(serverKey: serverKey, keys: keys)
            try socket.connect(endpoint)
            _ = try socket.send(parts: parts)
            guard socket.waitForInput(milliseconds: 10_000), let received = try socket.receiveMultipart(dontWait: true) else {
                throw BedError("no reply from the operator endpoint within 10 s")
            }
            return received.parts.map(\.array)
        }
    }
}

/// Which client keys the test's ZAP handler admits, as whom.
final class Admissions: Sendable {
    let keys = Mutex<[String: String]>([:])
}
