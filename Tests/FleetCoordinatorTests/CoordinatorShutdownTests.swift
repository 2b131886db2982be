import FleetCoordinator
import Foundation
import InMemoryLogging
import Logging
import ServiceLifecycle
import Testing

/// A real coordinator (its store in a temporary data directory, every endpoint on a free
/// port of 127.0.0.1) shut down gracefully as `capfleet coordinator` is at SIGTERM: its
/// parts stop in reverse of the order they were opened, each once the one before has ended.
@Suite(.timeLimit(.minutes(1))) struct CoordinatorShutdownTests {
    /// The order the parts stop in, and why each step matters.
    static let shutdownOrder = [
        "shutdown notice",
        // The beats first: nothing ticks into a part that is already gone.
        "daily offloads", "recording housekeeper", "live frame leases", "dashboard live feed", "telemetry reporter", "node liveness",
        // No new request reaches the takes or the agents…
        "operator endpoint", "control endpoint",
        // What reads the control dialog's node events ends after it…
        "live flow's node events", "moment rules", "sensor data", "detections", "takes' node events",
        // …then the takes finish their open segments while frames still arrive for them.
        "takes", "agent-held stills", "agent-held takes", "record endpoint",
        // Collect's copies end once no chunk can come.
        "collector",
        // The dashboard's live connections and views end before the HTTP server, which waits for them.
        "frame ingest", "clock endpoint", "dashboard live views", "metrics endpoint", "alert delivery",
        // Counters stored once ingest has stopped counting, before telemetry closes.
        "stored counters",
        // Refusals are published and audited until telemetry closes.
        "refusal reports", "telemetry endpoint",
        // Last: with every endpoint closed nothing slips in while no handler is bound.
        "ZAP handler",
    ]

    @Test func gracefulShutdown_stopsEveryPartInReverseOfItsOpening_andTheCoordinatorSaysItStopped() async throws {
        let configuration = EphemeralCoordinator.configuration(named: "shutdown")
        let dataDirectory = configuration.dataDirectory
        defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
        let log = InMemoryLogHandler()
        var logger = Logger(label: "capfleet.test") { _ in log }
        logger.logLevel = .debug

        let (ready, readyNow) = AsyncStream.makeStream(of: CoordinatorEndpoints.self)
        let coordinator = CoordinatorService(configuration: configuration, logger: logger, onReady: { readyNow.yield($0) })
        // As the command runs it, minus the signals: the test triggers the shutdown itself.
        let command = ServiceGroup(services: [coordinator], gracefulShutdownSignals: [], logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { running in
            running.addTask { try await command.run() }
            var endpoints: CoordinatorEndpoints?
            for await bound in ready {
                endpoints = bound
                break
            }
            #expect(endpoints?.operator.hasPrefix("tcp://127.0.0.1:") == true, "the coordinator became ready: \(log.entries)")
            await command.triggerGracefulShutdown()
            try await running.next()
        }

        let messages = log.entries.map { "\($0.message)" }
        let stopped = log.entries.filter { "\($0.message)" == "part stopped" }.compactMap { $0.metadata["part"].map { "\($0)" } }
        #expect(stopped == Self.shutdownOrder, "parts stopped in this order: \(stopped)")
        // Before, not right before: a part may log on its way down (seen in CI: one message between).
        let stopping = try #require(messages.firstIndex(of: "coordinator stopping"), "the coordinator says it is stopping: \(messages)")
        let firstPart = try #require(messages.firstIndex(of: "part stopped"))
        #expect(stopping < firstPart, "the coordinator says it is stopping before any part stops: \(messages)")
        let lastPart = try #require(messages.lastIndex(of: "part stopped"))
        #expect(messages.lastIndex(of: "coordinator stopped").map { $0 > lastPart } == true, "the coordinator says it stopped once every part has")
        let errors = log.entries.filter { $0.level >= .error }.map { "\($0.message) \($0.metadata)" }
        #expect(errors.isEmpty, "a clean shutdown logs no error: \(errors)")
    }
}
