import FleetCore
import Testing

@Suite struct TakeFrameLedgerTests {
    let start: UInt64 = 10_000_000_000
    let interval: UInt64 = 33_333_333

    func time(_ index: UInt64) -> UInt64 { start - 2 * interval + index * interval }

    @Test func theFirstFrameAtOrAfterTheStart_opensTheTake_andTheStopEndsIt() {
        var ledger = TakeFrameLedger(start: start)
        #expect(ledger.admit(sequence: 100, fleetTime: time(0), cumulativeDrops: .init()) == .beforeStart)
        #expect(ledger.admit(sequence: 101, fleetTime: time(1), cumulativeDrops: .init()) == .beforeStart)
        #expect(ledger.admit(sequence: 102, fleetTime: start, cumulativeDrops: .init()) == .keep)
        ledger.stop(at: time(5))
        #expect(ledger.admit(sequence: 103, fleetTime: time(3), cumulativeDrops: .init()) == .keep)
        #expect(ledger.admit(sequence: 104, fleetTime: time(4), cumulativeDrops: .init()) == .keep)
        #expect(ledger.admit(sequence: 105, fleetTime: time(5), cumulativeDrops: .init()) == .afterStop)
        #expect(ledger.stored == 3 && ledger.firstSequence == 102 && ledger.lastSequence == 104 && ledger.firstFleetTime == start)
        #expect(ledger.dropped.total == 0, "frames before the start are not the take's drops")
    }

    @Test func everyMissingFrame_isCountedWithTheReasonTheDeviceGave_elseAsADiscontinuity() {
        var ledger = TakeFrameLedger(start: 0)
        _ = ledger.admit(sequence: 1, fleetTime: time(1), cumulativeDrops: .init(late: 7))
        // Two frames missing, the device reported one out of buffers and three late (live path).
        _ = ledger.admit(sequence: 4, fleetTime: time(4), cumulativeDrops: .init(late: 10, outOfBuffers: 1))
        // Five missing, nothing reported: a discontinuity.
        _ = ledger.admit(sequence: 10, fleetTime: time(10), cumulativeDrops: .init(late: 10, outOfBuffers: 1))
        #expect(ledger.dropped == DropTally(late: 1, outOfBuffers: 1, discontinuity: 5))
        #expect(ledger.accountedFor == ledger.lastSequence! - ledger.firstSequence! + 1)
    }

    @Test func framesTheTakesEncoderCouldNotKeepUpWith_areEncoderLate() {
        var ledger = TakeFrameLedger(start: 0)
        _ = ledger.admit(sequence: 1, fleetTime: time(1), cumulativeDrops: .init())
        // Four missing: one out of buffers, two the encoder refused, one nobody reported.
        _ = ledger.admit(sequence: 6, fleetTime: time(6), cumulativeDrops: .init(outOfBuffers: 1, encoderLate: 2))
        #expect(ledger.dropped == DropTally(outOfBuffers: 1, discontinuity: 1, encoderLate: 2))
    }

    @Test func aFrameSentAgain_isKeptOnce() {
        var ledger = TakeFrameLedger(start: 0)
        for sequence: UInt64 in [1, 2, 3, 2, 3, 4] { _ = ledger.admit(sequence: sequence, fleetTime: time(sequence), cumulativeDrops: .init()) }
        #expect(ledger.stored == 4 && ledger.dropped.total == 0)
        #expect(ledger.admit(sequence: 4, fleetTime: time(4), cumulativeDrops: .init()) == .duplicate)
    }

    @Test func countsThatStartAgain_afterAnAgentRestart_areReadFromZero() {
        var ledger = TakeFrameLedger(start: 0)
        _ = ledger.admit(sequence: 50, fleetTime: time(50), cumulativeDrops: .init(outOfBuffers: 40))
        // The agent restarted: its counts start again; it reports 2 out of buffers for a gap of 3.
        _ = ledger.admit(sequence: 54, fleetTime: time(54), cumulativeDrops: .init(outOfBuffers: 2))
        #expect(ledger.dropped == DropTally(outOfBuffers: 2, discontinuity: 1))
    }

    @Test func framesLostAfterTheLastOneHeld_countAtTheEnd_andTheSpanRunsThroughThem() {
        var ledger = TakeFrameLedger(start: 0)
        _ = ledger.admit(sequence: 1, fleetTime: time(1), cumulativeDrops: .init(outOfBuffers: 1))
        _ = ledger.admit(sequence: 2, fleetTime: time(2), cumulativeDrops: .init(outOfBuffers: 1))
        // The encoder was late for the last three frames and a spool full for one: no later
        // frame shows their gap, the part's end says them.
        ledger.end(cumulativeDrops: .init(outOfBuffers: 2, encoderLate: 3))
        #expect(ledger.dropped == DropTally(outOfBuffers: 1, encoderLate: 3))
        #expect(ledger.lastSequence == 6 && ledger.stored == 2)
        #expect(ledger.accountedFor == ledger.lastSequence! - ledger.firstSequence! + 1)
        // An end said again adds nothing.
        ledger.end(cumulativeDrops: .init(outOfBuffers: 2, encoderLate: 3))
        #expect(ledger.dropped.total == 4 && ledger.lastSequence == 6)
    }

    @Test func anEndWithNothingHeld_orNothingNew_changesNothing() {
        var empty = TakeFrameLedger(start: 0)
        empty.end(cumulativeDrops: .init(encoderLate: 5))
        #expect(empty.dropped.total == 0 && empty.lastSequence == nil, "no span to run through")
        var quiet = TakeFrameLedger(start: 0)
        _ = quiet.admit(sequence: 7, fleetTime: time(7), cumulativeDrops: .init(discontinuity: 2))
        quiet.end(cumulativeDrops: .init(discontinuity: 2))
        #expect(quiet.dropped.total == 0 && quiet.lastSequence == 7)
    }
}
