import FleetCore
import Testing

@Suite struct NodeClockTests {
    @Test func testSetting_readsOffsetAndDrift() {
        #expect(NodeClock(testSetting: "+3.2s,+40ppm") == NodeClock(offset: 3_200_000_000, driftPPM: 40))
        #expect(NodeClock(testSetting: "-250ms") == NodeClock(offset: -250_000_000, driftPPM: 0))
        #expect(NodeClock(testSetting: "-30ppm, +15us") == NodeClock(offset: 15_000, driftPPM: -30))
        #expect(NodeClock(testSetting: "12ns")?.offset == 12)
        #expect(NodeClock(testSetting: "3.2") == nil)
        #expect(NodeClock(testSetting: "+1e30s") == nil)
        #expect(NodeClock(testSetting: "nanppm") == nil)
        #expect(NodeClock(testSetting: "+5000ppm") == nil)
    }

    /// Capture times go through the skewed clock and come back through its inverse.
    @Test func skewedReadings_comeBackToTheMonotonicClock() {
        let clock = NodeClock(offset: -1_500_000_000, driftPPM: -30)
        for monotonic: UInt64 in [2_000_000_000, 28_000_000_000_000, 28_000_033_333_333] {
            let local = clock.local(fromMonotonic: monotonic)
            #expect(Int64(bitPattern: local &- monotonic) == -1_500_000_000 + Int64((Double(monotonic) * -30e-6).rounded()))
            let back = clock.monotonic(fromLocal: local)
            #expect(back == monotonic || back &- monotonic == 1 || monotonic &- back == 1)
        }
        #expect(NodeClock.system.local(fromMonotonic: 42) == 42 && NodeClock.system.monotonic(fromLocal: 42) == 42)
    }

    @Test func fleetTimeReadsAsADate_andNeverGoesBack() {
        let source = FleetTimeSource()
        let first = source.now()
        let second = source.now()
        #expect(second >= first)
        // After 2020 and before 2100, in nanoseconds since the epoch.
        #expect(first > 1_577_836_800_000_000_000 && first < 4_102_444_800_000_000_000)
    }
}
