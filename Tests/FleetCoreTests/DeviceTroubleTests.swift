import FleetCore
import Testing

@Suite struct DeviceTroubleTests {
    func healthy() -> DeviceTrouble.Observation {
        DeviceTrouble.Observation(
            online: true, streaming: true, interruption: nil, drops: DropTally(late: 4), previousDrops: DropTally(late: 4),
            framesPerSecond: 29.9, activeFrameRate: 30, lastFrameAgeMilliseconds: 30, nodePressure: .fair)
    }

    @Test func aHealthyDeviceHasNoTrouble() {
        #expect(DeviceTrouble.reasons(healthy()).isEmpty)
    }

    @Test func offlineSaysOnlyThat() {
        var seen = healthy()
        seen.online = false
        seen.nodePressure = .critical
        #expect(DeviceTrouble.reasons(seen) == ["offline"])
    }

    @Test func newDropsAreNamedByReason() {
        var seen = healthy()
        seen.drops = DropTally(late: 10, outOfBuffers: 2, discontinuity: 0)
        seen.previousDrops = DropTally(late: 4, outOfBuffers: 0, discontinuity: 0)
        #expect(DeviceTrouble.reasons(seen) == ["dropping (6 late, 2 no buffer)"])
        // Old drops alone are history, not trouble.
        seen.previousDrops = seen.drops
        #expect(DeviceTrouble.reasons(seen).isEmpty)
    }

    @Test func interruptedStalledSlowAndPressure() {
        var seen = healthy()
        seen.interruption = .deviceInUse
        seen.streaming = false
        #expect(DeviceTrouble.reasons(seen) == ["interrupted (device_in_use)"])

        seen = healthy()
        seen.lastFrameAgeMilliseconds = 5200
        #expect(DeviceTrouble.reasons(seen) == ["stalled (no frame for 5 s)"])

        seen = healthy()
        seen.framesPerSecond = 12.04
        seen.nodePressure = .serious
        // One slow look may be a rate change the meter has not caught up with.
        #expect(DeviceTrouble.reasons(seen) == ["host pressure serious"])
        seen.previousRates = (framesPerSecond: 11.8, activeFrameRate: 30)
        #expect(DeviceTrouble.reasons(seen) == ["slow (12 of 30 fps)", "host pressure serious"])
    }

    /// A peer reports what it likes: absurd rates must neither trap nor flag a stall early.
    @Test func absurdRatesFromAPeer_neitherTrapNorMislead() {
        var seen = healthy()
        seen.activeFrameRate = 1e-300
        seen.framesPerSecond = 1e-300
        seen.lastFrameAgeMilliseconds = 10_000
        #expect(DeviceTrouble.reasons(seen).isEmpty)
        seen.activeFrameRate = .infinity
        #expect(DeviceTrouble.reasons(seen) == ["stalled (no frame for 10 s)"])
        #expect(VideoFormat.trim(1e300) == "1e+300")
        #expect(VideoFormat.trim(-1e19) == "-1e+19")
        #expect(VideoFormat.trim(.nan) == "nan")
        #expect(VideoFormat.trim(29.97) == "29.97")
        #expect(VideoFormat.trim(30) == "30")
    }
}
