import FleetCore
import Testing

/// The takes the coordinator records: who holds a device, how a take starts, stops, is
/// interrupted, loses consent, fails and is stored, as events in and actions out.
@Suite struct TakeBookTests {
    typealias Part = TakeBook.Part

    /// A take of cam-1 (node-a) and cam-2 (node-b) starting at 1 000, answered by both agents.
    static func recording() -> TakeBook {
        var book = TakeBook()
        _ = try? book.reserve(takeID: "t1", devices: [("cam-1", "node-a"), ("cam-2", "node-b")], startFleetNs: 1_000)
        _ = book.agentsAnswered(takeID: "t1", refusals: [])
        return book
    }

    @Test func reserve_startsAWriterAndTellsTheAgentForEveryDevice() throws {
        var book = TakeBook()
        let actions = try book.reserve(takeID: "t1", devices: [("cam-1", "node-a"), ("cam-2", "node-b")], startFleetNs: 1_000)
        #expect(
            actions == [
                .startWriter(Part(takeID: "t1", deviceID: "cam-1"), nodeID: "node-a"),
                .startWriter(Part(takeID: "t1", deviceID: "cam-2"), nodeID: "node-b"),
                .order(Part(takeID: "t1", deviceID: "cam-1"), nodeID: "node-a", .record(startFleetNs: 1_000)),
                .order(Part(takeID: "t1", deviceID: "cam-2"), nodeID: "node-b", .record(startFleetNs: 1_000)),
            ])
        #expect(book.phase(of: "t1") == .starting)
        #expect(book.take(recording: "cam-2") == "t1")
    }

    @Test func twoStartsOfTheSameDevice_exactlyOneWins() throws {
        var book = TakeBook()
        _ = try book.reserve(takeID: "t1", devices: [("cam-1", "node-a")], startFleetNs: 1_000)
        // The second request comes while the first is still being set up (agents not yet answered).
        #expect(throws: TakeBook.Refusal(deviceID: "cam-1", busyIn: "t1")) {
            try book.reserve(takeID: "t2", devices: [("cam-3", "node-c"), ("cam-1", "node-a")], startFleetNs: 2_000)
        }
        // Nothing of the refused take was reserved.
        #expect(book.take(recording: "cam-3") == nil)
        #expect(book.phase(of: "t2") == nil)
    }

    @Test func aRefusingAgent_undoesTheWholeTakeAndFreesItsDevices() throws {
        var book = TakeBook()
        _ = try book.reserve(takeID: "t1", devices: [("cam-1", "node-a"), ("cam-2", "node-b")], startFleetNs: 1_000)
        let actions = book.agentsAnswered(takeID: "t1", refusals: [("cam-2", "no clock estimate yet")])
        #expect(actions.contains(.closeWriter(Part(takeID: "t1", deviceID: "cam-1"))))
        // Not a consent stop: nothing was withdrawn, the take just never started.
        #expect(actions.contains(.order(Part(takeID: "t1", deviceID: "cam-1"), nodeID: "node-a", .abandon(atFleetNs: 1_000))))
        #expect(!actions.contains { if case .order(_, _, .withhold) = $0 { true } else { false } })
        #expect(actions.contains(.write(.takeAbandoned(takeID: "t1", error: "cam-2: no clock estimate yet"))))
        #expect(actions.last == .settled(takeID: "t1"))
        #expect(book.take(recording: "cam-1") == nil)
        _ = try book.reserve(takeID: "t2", devices: [("cam-1", "node-a")], startFleetNs: 2_000)
    }

    @Test func stop_isNeverBeforeTheStart_andOnlyMovesEarlier() throws {
        var book = Self.recording()
        let stopped = book.stop(takeID: "t1", atFleetNs: 500)
        let first = try #require(stopped)
        #expect(first.stopFleetNs == 1_000)
        #expect(first.actions.contains(.stopWriter(Part(takeID: "t1", deviceID: "cam-2"), atFleetNs: 1_000)))
        #expect(first.actions.contains(.order(Part(takeID: "t1", deviceID: "cam-1"), nodeID: "node-a", .stop(atFleetNs: 1_000))))
        #expect(book.stop(takeID: "t1", atFleetNs: 9_000) == nil)
    }

    @Test func theLastPartEnding_storesTheTakeAtItsStop() throws {
        var book = Self.recording()
        _ = book.stop(takeID: "t1", atFleetNs: 5_000)
        let first = book.report(.ended(reason: "stopped", withheldFrames: 0), from: Part(takeID: "t1", deviceID: "cam-1"), nowFleetNs: 6_000)
        #expect(!first.contains(.settled(takeID: "t1")))
        #expect(book.phase(of: "t1") == .recording)
        let last = book.report(.ended(reason: "stopped", withheldFrames: 3), from: Part(takeID: "t1", deviceID: "cam-2"), nowFleetNs: 7_000)
        #expect(last.contains(.write(.partEnded(Part(takeID: "t1", deviceID: "cam-2"), reason: "stopped", withheldFrames: 3))))
        #expect(last.contains(.write(.takeStored(takeID: "t1", stopFleetNs: 5_000))))
        #expect(last.last == .settled(takeID: "t1"))
        #expect(book.phase(of: "t1") == nil)
    }

    @Test func aNodeGoingSilent_interruptsItsPartsOnce_andFramesFlowingResumeThem() {
        var book = Self.recording()
        let silent = book.nodeWentSilent("node-b", nowFleetNs: 3_000)
        #expect(silent.contains(.write(.partInterrupted(Part(takeID: "t1", deviceID: "cam-2")))))
        #expect(!silent.contains { if case .note(Part(takeID: "t1", deviceID: "cam-1"), _, _, _) = $0 { true } else { false } })
        #expect(book.nodeWentSilent("node-b", nowFleetNs: 3_500).isEmpty)
        let flowing = book.report(.flowing, from: Part(takeID: "t1", deviceID: "cam-2"), nowFleetNs: 4_000)
        #expect(flowing.contains(.note(Part(takeID: "t1", deviceID: "cam-2"), kind: "resumed", fleetNs: 4_000, fields: [:])))
        // Flowing again without an interruption notes nothing.
        #expect(
            book.report(.flowing, from: Part(takeID: "t1", deviceID: "cam-2"), nowFleetNs: 4_100)
                == [.write(.partRecording(Part(takeID: "t1", deviceID: "cam-2")))])
    }

    @Test func consentWithdrawn_stopsThatDevicesPartNow_andTellsTheAgentToWithhold() {
        var book = Self.recording()
        let actions = book.consentWithdrawn(deviceID: "cam-1", state: "revoked", reason: "a visitor", nowFleetNs: 8_000)
        let part = Part(takeID: "t1", deviceID: "cam-1")
        #expect(actions.first == .stopWriter(part, atFleetNs: 8_000))
        #expect(actions.contains(.order(part, nodeID: "node-a", .withhold(atFleetNs: 8_000))))
        #expect(!actions.contains { if case .stopWriter(Part(takeID: "t1", deviceID: "cam-2"), _) = $0 { true } else { false } })
    }

    @Test func aFailedPart_failsTheTakeAndStopsTheOtherParts() {
        var book = Self.recording()
        let actions = book.report(.failed("the disk is full"), from: Part(takeID: "t1", deviceID: "cam-1"), nowFleetNs: 9_000)
        #expect(actions.contains(.write(.takeFailed(takeID: "t1", error: "cam-1: the disk is full"))))
        #expect(actions.contains(.stopWriter(Part(takeID: "t1", deviceID: "cam-2"), atFleetNs: 9_000)))
        #expect(book.phase(of: "t1") == .failed("cam-1: the disk is full"))
        // The failed take is not stored as stopped when its last part ends.
        let last = book.report(.ended(reason: "stopped", withheldFrames: 0), from: Part(takeID: "t1", deviceID: "cam-2"), nowFleetNs: 9_500)
        #expect(!last.contains { if case .write(.takeStored) = $0 { true } else { false } })
        #expect(last.last == .settled(takeID: "t1"))
    }

    @Test func theIndexRefusingAWrite_failsTheTakeSayingWhat_once() {
        var book = Self.recording()
        let actions = book.indexFailed(takeID: "t1", writing: "the end of cam-1's part", error: "disk I/O error", nowFleetNs: 9_000)
        let message = "the recordings index could not record the end of cam-1's part: disk I/O error"
        #expect(actions.contains(.write(.takeFailed(takeID: "t1", error: message))))
        #expect(actions.contains(.order(Part(takeID: "t1", deviceID: "cam-1"), nodeID: "node-a", .stop(atFleetNs: 9_000))))
        #expect(book.phase(of: "t1") == .failed(message))
        // A second failure is announced but fails nothing again.
        let again = book.indexFailed(takeID: "t1", writing: "x", error: "y", nowFleetNs: 9_100)
        #expect(again.count == 1)
    }

    @Test func aNodeRegisteringAgain_hearsOfItsPartsStartAndStop() throws {
        var book = Self.recording()
        _ = book.stop(takeID: "t1", atFleetNs: 5_000)
        let orders = book.registered("node-b")
        #expect(orders.count == 1)
        #expect(orders.first?.part == Part(takeID: "t1", deviceID: "cam-2"))
        #expect(orders.first?.orders == [.record(startFleetNs: 1_000), .stop(atFleetNs: 5_000)])
        #expect(book.registered("node-z").isEmpty)
    }

    @Test func resume_afterARestart_startsAWriterPerPartInProgress() {
        var book = TakeBook()
        let actions = book.resume(takeID: "t9", startFleetNs: 100, stopFleetNs: nil, devices: [("cam-4", "node-d")])
        #expect(actions == [.startWriter(Part(takeID: "t9", deviceID: "cam-4"), nodeID: "node-d")])
        #expect(book.phase(of: "t9") == .recording)
        #expect(throws: TakeBook.Refusal.self) { try book.reserve(takeID: "t10", devices: [("cam-4", "node-d")], startFleetNs: 200) }
    }
}
