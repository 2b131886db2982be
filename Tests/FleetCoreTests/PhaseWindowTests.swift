import FleetCore
import Testing

struct PhaseWindowTests {
    /// 30 fps: a 33.333 ms grid.
    let interval: UInt64 = 33_333_333

    @Test func statistics_coverTheLastMinuteOnly() {
        var window = PhaseWindow()
        // 144 s of frames at 50 fps: 1 ms off for the first 84 s, then 10 µs off.
        let start: UInt64 = 1_000_000_000_000
        for frame in 0..<7200 {
            window.record(phase: frame < 4200 ? 1_000_000 : -10_000, at: start + UInt64(frame) * 20_000_000, interval: 20_000_000)
        }
        let figures = window.statistics(asOf: start + 7199 * 20_000_000)
        #expect(figures.maximum == 10_000, "only the last minute: \(figures)")
        #expect(figures.frames == 3000)
    }

    @Test func capacity_keepsTheNewestFrames() {
        var window = PhaseWindow(capacity: 100)
        for frame in 0..<1000 { window.record(phase: Int64(frame), at: UInt64(frame) * 1_000_000, interval: interval) }
        let figures = window.statistics(asOf: 999_000_000)
        #expect(figures.frames == 100)
        #expect(figures.maximum == 999)
        #expect(figures.median == 949)
    }

    @Test func anotherInterval_startsAnotherWindow() {
        var window = PhaseWindow()
        window.record(phase: 5_000_000, at: 1_000, interval: interval)
        window.record(phase: 1_000, at: 2_000, interval: 40_000_000)
        #expect(window.statistics(asOf: 2_000) == PhaseStatistics(frames: 1, median: 1_000, p99: 1_000, maximum: 1_000))
    }

    /// A free-running camera 50 ppm slow: its frames start 50 µs later every second, and the
    /// phase wraps from +interval/2 to −interval/2 on the way; the drift comes out straight.
    @Test func drift_ofAFreeRunningCamera_throughTheWrap() {
        var window = PhaseWindow()
        let grid = FrameGrid(origin: 0, interval: interval)
        let period = Double(interval) * (1 + 50e-6)
        // Start 16.5 ms late, so that the phase passes +16.67 ms within the minute.
        let first = 10_000 * Double(interval) + 16_500_000
        for frame in 0..<1800 {
            let time = UInt64(first + Double(frame) * period)
            window.record(phase: grid.phase(of: time), at: time, interval: interval)
        }
        let drift = window.drift(asOf: UInt64(first + 1799 * period))
        let rate = try! #require(drift)
        #expect(abs(rate - 50_000) < 50, "50 µs/s: \(rate)")
    }

    @Test func drift_needsASecondOfFrames() {
        var window = PhaseWindow()
        for frame in 0..<10 { window.record(phase: 100, at: UInt64(frame) * 33_000_000, interval: interval) }
        #expect(window.drift(asOf: 330_000_000) == nil)
    }
}
