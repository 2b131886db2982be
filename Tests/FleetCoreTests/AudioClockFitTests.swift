import FleetCore
import Testing

/// A microphone's clock against the host's (microphones.md, "The audio clock"): the rate in
/// ppm, block times without the stamps' jitter, the jitter bound, and a fresh fit after a gap.
@Suite struct AudioClockFitTests {
    /// A converter `ppm` fast, stamped with up to ±`jitter` ns of noise (a fixed sequence).
    static func feed(
        _ fit: inout AudioClockFit, seconds: Double, ppm: Double, jitter: Double, from startFrame: UInt64 = 0, at t0: Double = 5e12
    )
        -> [(frame: UInt64, trueNs: Double)]
    {
        let rate = 48_000.0 * (1 + ppm * 1e-6)
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        var truth: [(UInt64, Double)] = []
        var frame = startFrame
        while Double(frame - startFrame) < seconds * 48_000 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let noise = (Double(seed >> 11) / Double(1 << 53) * 2 - 1) * jitter
            let trueNs = t0 + Double(frame - startFrame) * 1e9 / rate
            fit.add(frame: frame, timeNs: UInt64(trueNs + noise))
            truth.append((frame, trueNs))
            frame += 480
        }
        return truth
    }

    @Test func aConverter50ppmFast_measures50ppm_andPlacesBlocksWithinMicrosecondsDespiteHalfAMillisecondOfJitter() throws {
        var fit = AudioClockFit(sampleRate: 48_000)
        let truth = Self.feed(&fit, seconds: 20, ppm: 50, jitter: 500_000)
        let ppm = try #require(fit.ratePPM)
        #expect(abs(ppm - 50) < 3, "measured \(ppm) ppm")
        // The raw stamps stray up to 0.5 ms; the line does not.
        for (frame, trueNs) in truth.suffix(500) {
            let placed = try #require(fit.time(ofFrame: frame))
            #expect(abs(Double(placed) - trueNs) < 50_000, "frame \(frame): \(Double(placed) - trueNs) ns off")
        }
        #expect(fit.jitterNanoseconds > 400_000 && fit.jitterNanoseconds <= 520_000, "\(fit.jitterNanoseconds)")
        #expect(abs(fit.fittedSeconds - 20) < 0.1)
    }

    @Test func beforeTwoSeconds_theRateIsUnknown_andBlocksArePlacedAtTheNominalRate() throws {
        var fit = AudioClockFit(sampleRate: 48_000)
        #expect(fit.time(ofFrame: 0) == nil)
        _ = Self.feed(&fit, seconds: 1.5, ppm: 0, jitter: 0)
        #expect(fit.ratePPM == nil)
        // Exactly the nominal 20 833.3 ns a frame from the first stamp.
        #expect(fit.time(ofFrame: 48_000) == 5_000_000_000_000 + 1_000_000_000)
    }

    @Test func aGap_startsTheFitOver_countingIt() throws {
        var fit = AudioClockFit(sampleRate: 48_000)
        _ = Self.feed(&fit, seconds: 5, ppm: -30, jitter: 100_000)
        #expect(fit.ratePPM != nil)
        fit.restart()
        #expect(fit.restarts == 1 && fit.ratePPM == nil && fit.time(ofFrame: 0) == nil)
        let truth = Self.feed(&fit, seconds: 4, ppm: -30, jitter: 100_000, from: 300_000, at: 6e12)
        let ppm = try #require(fit.ratePPM)
        #expect(abs(ppm - -30) < 15, "\(ppm)")
        let last = try #require(truth.last)
        #expect(abs(Double(try #require(fit.time(ofFrame: last.frame))) - last.trueNs) < 30_000)
    }

    @Test func aLongTake_keepsOnlyItsWindow_andStaysExact() throws {
        var fit = AudioClockFit(sampleRate: 48_000, windowSeconds: 10)
        let truth = Self.feed(&fit, seconds: 120, ppm: 12, jitter: 200_000)
        #expect(abs(fit.fittedSeconds - 10) < 0.1)
        #expect(abs(try #require(fit.ratePPM) - 12) < 5)
        let last = try #require(truth.last)
        #expect(abs(Double(try #require(fit.time(ofFrame: last.frame))) - last.trueNs) < 30_000)
    }
}
