import FleetCore
import Testing

/// Takes written on the agents: the book keeps the same decisions (who holds a device, start,
/// stop, end) but starts no writer of the coordinator's, and a silent node records on.
@Suite struct TakeBookAgentStoreTests {
    typealias Part = TakeBook.Part
    let cam1 = Part(takeID: "t1", deviceID: "cam-1")
    let cam2 = Part(takeID: "t1", deviceID: "cam-2")

    func recording() throws -> TakeBook {
        var book = TakeBook()
        _ = try book.reserve(takeID: "t1", devices: [("cam-1", "node-a"), ("cam-2", "node-b")], startFleetNs: 1_000, store: .agent)
        _ = book.agentsAnswered(takeID: "t1", refusals: [])
        return book
    }

    @Test func reserve_ordersEachAgentToRecord_withNoWriterOnTheCoordinator() throws {
        var book = TakeBook()
        let actions = try book.reserve(takeID: "t1", devices: [("cam-1", "node-a"), ("cam-2", "node-b")], startFleetNs: 1_000, store: .agent)
        #expect(
            actions == [.order(cam1, nodeID: "node-a", .record(startFleetNs: 1_000)), .order(cam2, nodeID: "node-b", .record(startFleetNs: 1_000))])
        #expect(book.store(of: "t1") == .agent)
        let answered = book.agentsAnswered(takeID: "t1", refusals: [])
        #expect(
            answered.contains(.write(.partRecording(cam1))) && answered.contains(.write(.partRecording(cam2))),
            "an agent that took up its part records from the start: \(answered)")
    }

    @Test func stop_onlyOrdersTheAgents() throws {
        var book = try recording()
        let stopped = book.stop(takeID: "t1", atFleetNs: 5_000)
        let (stop, actions) = try #require(stopped)
        #expect(stop == 5_000)
        #expect(!actions.contains { if case .stopWriter = $0 { true } else { false } }, "\(actions)")
        #expect(actions.contains(.order(cam1, nodeID: "node-a", .stop(atFleetNs: 5_000))))
    }

    @Test func aSilentNode_isNotAnInterruption_itsAgentRecordsOn() throws {
        var book = try recording()
        let actions = book.nodeWentSilent("node-a", nowFleetNs: 2_000)
        #expect(!actions.contains(.write(.partInterrupted(cam1))), "\(actions)")
        #expect(
            actions.contains { if case let .indexEvent(part, kind, _, _) = $0 { part == cam1 && kind == "unreachable" } else { false } }, "\(actions)"
        )
        // Back: the part is recording, and the take notes it was resumed.
        let back = book.report(.flowing, from: cam1, nowFleetNs: 3_000)
        #expect(back.contains(.write(.partRecording(cam1))))
        #expect(book.nodeWentSilent("node-a", nowFleetNs: 4_000).count > 0, "silent again after it was back: noted again")
    }

    @Test func everyPartEnding_storesTheTake_withoutClosingWriters() throws {
        var book = try recording()
        _ = book.stop(takeID: "t1", atFleetNs: 5_000)
        let first = book.report(.ended(reason: "stopped", withheldFrames: 0), from: cam1, nowFleetNs: 5_100)
        #expect(first.contains(.write(.partEnded(cam1, reason: "stopped", withheldFrames: 0))))
        #expect(!first.contains(.closeWriter(cam1)))
        let last = book.report(.ended(reason: "stopped", withheldFrames: 0), from: cam2, nowFleetNs: 5_200)
        #expect(last.contains(.write(.takeStored(takeID: "t1", stopFleetNs: 5_000))))
        #expect(last.contains(.settled(takeID: "t1")))
        #expect(book.take(recording: "cam-1") == nil)
    }

    @Test func aFailedPart_failsTheTake_andStopsTheOtherAgents() throws {
        var book = try recording()
        let actions = book.report(.failed("disk full"), from: cam1, nowFleetNs: 3_000)
        #expect(actions.contains(.write(.takeFailed(takeID: "t1", error: "cam-1: disk full"))))
        #expect(actions.contains(.order(cam2, nodeID: "node-b", .stop(atFleetNs: 3_000))))
        #expect(!actions.contains { if case .stopWriter = $0 { true } else { false } })
    }

    @Test func resume_afterARestart_startsNoWriter() {
        var book = TakeBook()
        let actions = book.resume(takeID: "t1", startFleetNs: 1_000, stopFleetNs: nil, devices: [("cam-1", "node-a")], store: .agent)
        #expect(actions.isEmpty)
        #expect(book.registered("node-a").map(\.part) == [cam1])
    }
}
