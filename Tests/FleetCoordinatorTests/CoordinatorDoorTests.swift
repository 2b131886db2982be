import FleetBus
import FleetCoordinator
import FleetProtocol
import FleetStore
import Foundation
import Logging
import ServiceLifecycle
import Testing

/// A real coordinator with its HTTP port left to the kernel (port 0): the operator door is
/// made before the dashboard that serves it, and still tells the port the dashboard is on.
@Suite(.timeLimit(.minutes(1))) struct CoordinatorDoorTests {
    @Test func withTheHTTPPortChosenByTheKernel_whoAmITellsThePortTheDashboardAndMetricsAreServedOn() async throws {
        let configuration = EphemeralCoordinator.configuration(named: "door")
        let dataDirectory = configuration.dataDirectory
        defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        let operatorKeys = try CurveKeyPair.generate()
        do {
            let store = try FleetDatabase(path: configuration.databasePath)
            try await store.saveOperator(
                OperatorRecord(name: "ana", publicKey: operatorKeys.publicKey.z85, role: "admin", addedAt: 1, addedBy: "test"),
                audit: AuditEntry(at: 1, actor: "test", action: "operator.add", target: "ana", outcome: "ok"))
        }

        let (ready, readyNow) = AsyncStream.makeStream(of: CoordinatorEndpoints.self)
        // Quiet: a coordinator's log is not the test's output.
        let logger = Logger(label: "capfleet.test.door") { _ in SwiftLogNoOpLogHandler() }
        let coordinator = CoordinatorService(configuration: configuration, logger: logger, onReady: { readyNow.yield($0) })
        let command = ServiceGroup(services: [coordinator], gracefulShutdownSignals: [], logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { running in
            running.addTask { try await command.run() }
            var bound: CoordinatorEndpoints?
            for await endpoints in ready {
                bound = endpoints
                break
            }
            let endpoints = try #require(bound, "the coordinator became ready")
            let metricsURL = try #require(endpoints.metrics, "the HTTP port is on")
            let httpPort = try #require(metricsURL.split(separator: ":").last?.split(separator: "/").first.flatMap { UInt32($0) })
            #expect(httpPort != 0)

            let dealer = try ZMQSocket(context: ZMQContext(), type: .dealer)
            try dealer.makeCurveClient(serverKey: endpoints.publicKey, keys: operatorKeys)
            try dealer.connect(endpoints.operator)
            try dealer.send(parts: [
                try Capfleet_V1_OperatorRequest.with {
                    $0.requestID = 1; $0.whoAmI = .init()
                }.serializedBytes()
            ])
            // Polled, not waited for on this thread: the coordinator answering runs on the same
            // cooperative pool, which a blocking wait would hold a thread of.
            var received: (parts: [ZMQMessage], overflowed: Bool)?
            for _ in 0..<500 where received == nil {
                received = try dealer.receiveMultipart(dontWait: true)
                if received == nil { try await Task.sleep(for: .milliseconds(20)) }
            }
            let answer = try #require(received, "the operator door answers within 10 s")
            let reply = try Capfleet_V1_OperatorReply(serializedBytes: try #require(answer.parts.last).array)
            #expect(reply.status.code == .ok, "\(reply.status)")
            #expect(reply.endpoints.httpPort == httpPort && reply.endpoints.metricsPort == httpPort, "\(reply.endpoints)")

            // And the dashboard is there: its page, on that port.
            #expect(try await Self.curlStatus("http://127.0.0.1:\(httpPort)/") == "200")
            await command.triggerGracefulShutdown()
            try await running.next()
        }
    }

    /// The HTTP status curl gets for `url`, awaited rather than waited for (see above).
    static func curlStatus(_ url: String) async throws -> String {
        let curl = Process()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        curl.arguments = ["-s", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}", url]
        let output = Pipe()
        curl.standardOutput = output
        await withCheckedContinuation { (ended: CheckedContinuation<Void, Never>) in
            curl.terminationHandler = { _ in ended.resume() }
            do {
                try curl.run()
            } catch {
                ended.resume()
            }
        }
        return String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }
}
