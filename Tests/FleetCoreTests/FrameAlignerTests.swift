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
}
