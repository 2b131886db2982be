import FleetCore
import Testing

/// A GenICam camera's block ids as the fleet's ever-growing frame sequence.
@Suite struct BlockIDSequenceTests {
    @Test func a16BitBlockIDThatWraps_goesOnCounting_andAGapAcrossTheWrapStaysAGap() {
        var sequences = BlockIDSequence()
        #expect([65533, 65534, 65535, 1, 2].map { sequences.sequence(of: $0) } == [65533, 65534, 65535, 65536, 65537])
        // 65535 and 1 of the next round lost: two missing numbers, as the camera sent them.
        var lossy = BlockIDSequence()
        #expect([65534, 2].map { lossy.sequence(of: $0) } == [65534, 65537])
        // Many wraps.
        var long = BlockIDSequence()
        var last: UInt64 = 0
        for round in 0..<3 { for id in stride(from: UInt64(1), through: 65535, by: 4096) { last = long.sequence(of: id); _ = round } }
        #expect(last > 3 * 60_000)
    }

    @Test func a64BitBlockID_isTakenAsItIs() {
        var sequences = BlockIDSequence()
        #expect([70_000, 70_001, 70_002].map { sequences.sequence(of: $0) } == [70_000, 70_001, 70_002])
    }

    @Test func aStreamOpenedAgain_followsOnFromTheLastSequence_evenWhenTheCameraCountsFromOne() {
        var sequences = BlockIDSequence()
        _ = sequences.sequence(of: 500)
        sequences.restart()
        #expect([1, 2].map { sequences.sequence(of: $0) } == [501, 502])
        var next = BlockIDSequence(continuingAfter: 502)
        #expect(next.sequence(of: 9) == 503)
        #expect(BlockIDSequence().lastSequence == 0)
    }
}
