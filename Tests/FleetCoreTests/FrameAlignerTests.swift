import FleetCore
import Testing

@Suite struct FrameAlignerTests {
    let period: UInt64 = 33_333_333

    @Test func phaseIsTheDistanceToTheNearestSlot() {
        let aligner = FrameAligner(origin: 1_000_000_000)
        #expect(aligner.phase(ofFleetTime: 1_000_000_000, period: period) == 0)
        #expect(aligner.phase(ofFleetTime: 1_000_000_000 + 5 * period + 1_000, period: period) == 1_000)
        #expect(aligner.phase(ofFleetTime: 1_000_000_000 + 5 * period - 1_000, period: period) == -1_000)
        #expect(aligner.phase(ofFleetTime: 1_000_000_000 - 2_000, period: period) == -2_000)
    }

    /// A node 3.2 s ahead and 40 ppm fast, starting at an arbitrary phase: within a few
    /// frames its deadlines fall on the grid in fleet time, and no interval strays more than
    /// a tenth of a period from nominal.
    @Test func deadlinesConvergeOntoTheGrid_withBoundedSteps() {
        let mapping = FleetClockMapping(referenceLocal: 50_000_000_000, offset: -1_795_000_000_000_000_000 + 3_200_000_000, driftPPM: 40)
        let aligner = FrameAligner(origin: 1_795_000_000_000_000_000)
        var deadline: UInt64 = 50_000_000_000 + 12_345_678
        var phases: [Int64] = []
        for _ in 0..<40 {
            let next = aligner.nextDeadline(after: deadline, period: period, mapping: mapping)
            let interval = Int64(bitPattern: next &- deadline)
            #expect(abs(interval - Int64(period)) <= Int64(Double(period) * 0.1) + 1)
            deadline = next
            phases.append(aligner.phase(ofFleetTime: mapping.fleetTime(atLocal: deadline), period: period))
        }
        #expect(phases.suffix(30).allSatisfy { abs($0) <= 2_000 }, "\(phases)")
    }
}
