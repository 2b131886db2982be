import Logging
import ServiceLifecycle
import Synchronization
import Testing

@testable import FleetDaemon

/// A daemon's parts stop in reverse of their list, each once the part after it has ended,
/// whether shutdown comes to their group, to the group above it, or from a part that fails.
@Suite(.timeLimit(.minutes(1))) struct DaemonPartsTests {
    /// What the parts did, in the order they did it.
    final class Journal: Sendable {
        private let lines = Mutex<[String]>([])
        var entries: [String] { lines.withLock { $0 } }
        func note(_ line: String) { lines.withLock { $0.append(line) } }
    }

    struct Revoked: Error, Equatable { let reason: String }

    let logger = Logger(label: "capfleet.test")

    /// A part like an endpoint: its work serves until its stop closes what it serves.
    func endpoint(_ name: String, journal: Journal) -> StoppingService {
        let (messages, source) = AsyncStream.makeStream(of: Int.self)
        return StoppingService(
            name,
            run: {
                for await _ in messages {}
                journal.note("\(name) served its last")
            },
            stop: {
                journal.note("\(name) stopping")
                // A stop that takes a while: the part listed before it must wait for it.
                for _ in 0..<10 { await Task.yield() }
                source.finish()
                journal.note("\(name) stopped")
            })
    }

    /// A part that only holds something to release.
    func holder(_ name: String, journal: Journal) -> StoppingService {
        StoppingService(name) {
            journal.note("\(name) stopping")
            for _ in 0..<10 { await Task.yield() }
            journal.note("\(name) stopped")
        }
    }

    func expectStoppedLastFirst(_ journal: Journal, _ names: [String]) {
        let stops = journal.entries.filter { entry in names.contains { entry == "\($0) stopping" || entry == "\($0) stopped" } }
        #expect(
            stops == names.reversed().flatMap { ["\($0) stopping", "\($0) stopped"] },
            "each part stops once the part listed after it has stopped: \(journal.entries)")
    }

    @Test func parts_stopInReverseOfTheirList_eachAfterTheNextHasEnded() async throws {
        let journal = Journal()
        let parts: [any Service] = [
            holder("access handler", journal: journal),
            holder("telemetry", journal: journal),
            endpoint("record endpoint", journal: journal),
            holder("takes", journal: journal),
            endpoint("control endpoint", journal: journal),
        ]
        let group = ServiceGroup.daemon(parts, logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { running in
            running.addTask { try await group.run() }
            await group.triggerGracefulShutdown()
            try await running.next()
        }
        expectStoppedLastFirst(journal, ["access handler", "telemetry", "record endpoint", "takes", "control endpoint"])
        // Serving is cancelled as the stop begins: no message is handled after the part was
        // told to stop, and none is still being handled when the part before it stops.
        let entries = journal.entries
        let controlServed = try #require(entries.firstIndex(of: "control endpoint served its last"))
        #expect(controlServed < entries.firstIndex(of: "takes stopping")!, "the control endpoint's serving ended before the takes stopped")
    }

    /// As the coordinator runs: its parts' group inside its service, inside the command's group.
    @Test func partsOfAServiceInAnotherGroup_stopInReverse_atThatGroupsGracefulShutdown() async throws {
        let journal = Journal()
        let names = ["store", "ingest", "operator endpoint"]
        let coordinator = ClosureService { [logger] in
            let parts = names.map { name in name.hasSuffix("endpoint") ? endpoint(name, journal: journal) : holder(name, journal: journal) }
            try await ServiceGroup.daemon(parts, logger: logger).run()
            journal.note("coordinator stopped")
        }
        let command = ServiceGroup(services: [coordinator], gracefulShutdownSignals: [], logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { running in
            running.addTask { try await command.run() }
            await command.triggerGracefulShutdown()
            try await running.next()
        }
        expectStoppedLastFirst(journal, names)
        #expect(journal.entries.last == "coordinator stopped")
    }

    /// As an agent is revoked: the revocation ends its work with an error, every other part
    /// stops as at a signal, and the group ends with that error.
    @Test func aPartThatFails_stopsTheOthersInReverse_andTheGroupEndsWithItsError() async throws {
        let journal = Journal()
        let (revocations, revoke) = AsyncStream.makeStream(of: String.self)
        let parts: [any Service] = [
            holder("recording light", journal: journal),
            holder("frame publisher", journal: journal),
            holder("cameras", journal: journal),
            StoppingService(
                "revocation watch",
                run: {
                    for await reason in revocations { throw Revoked(reason: reason) }
                }, stop: {}),
            holder("shutdown notice", journal: journal),
        ]
        let group = ServiceGroup.daemon(parts, logger: logger)
        revoke.yield("laptop stolen")
        await #expect(throws: Revoked(reason: "laptop stolen")) {
            try await group.run()
        }
        expectStoppedLastFirst(journal, ["recording light", "frame publisher", "cameras", "shutdown notice"])
    }

    @Test func partsCancelledInsteadOfShutDown_stillStop() async throws {
        let journal = Journal()
        let names = ["clock endpoint", "frame ingest"]
        let group = ServiceGroup.daemon(names.map { endpoint($0, journal: journal) }, logger: logger)
        let running = Task { try await group.run() }
        // Cancelled before or after the parts start: either way each must release what it holds.
        running.cancel()
        _ = await running.result
        for name in names {
            #expect(journal.entries.contains("\(name) stopped"), "\(name) stopped although the group was cancelled: \(journal.entries)")
        }
    }
}
