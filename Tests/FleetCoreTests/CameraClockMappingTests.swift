import FleetCore
import Testing

/// A camera's own timestamps put on the host's clock from the frames' arrivals
/// (device-model.md, "GenICam cameras").
@Suite struct CameraClockMappingTests {
    /// A camera 40 ppm slow, its clock 5 s off; frames every 33 ms arrive 2 ms after they were
    /// stamped plus up to 6 ms of transfer jitter (one in three with none).
    @Test func framesArePlacedByTheCameraClock_withinTheShortestTransfer_andItsRateMeasured() throws {
        var mapping = CameraClockMapping()
        var generator = SplitMix(seed: 7)
        var errors: [Double] = []
        for frame in 0..<(30 * 30) {
            let host = UInt64(1_000_000_000_000) + UInt64(frame) * 33_333_333
            let camera = UInt64(Double(host - 1_000_000_000_000) * (1 - 40e-6)) + 5_000_000_000
            let jitter = generator.next() % 3 == 0 ? 0 : generator.next() % 6_000_000
            mapping.add(cameraNs: camera, arrivalNs: host + 2_000_000 + jitter)
            if frame > 300, let placed = mapping.capture(cameraNs: camera) {
                errors.append(Double(Int64(bitPattern: placed &- host)) - 2_000_000)
            }
        }
        let worst = errors.map(abs).max() ?? .infinity
        print("camera clock mapping: worst \(worst / 1e3) µs off (less the 2 ms transfer), rate \(mapping.ratePPM ?? .nan) ppm")
        #expect(worst < 50_000, "frames placed within 50 µs of their stamp plus the shortest transfer")
        let rate = try #require(mapping.ratePPM)
        #expect(abs(rate - 40) < 2, "\(rate) ppm")
    }

    /// The same camera triggered by the host every 40 ms: each trigger reaches it and starts
    /// the exposure 60–560 µs after it was sent; the frame arrives 12–18 ms after its stamp
    /// (a 10 ms exposure, readout and transfer). The arrivals alone place frames 12 ms late;
    /// the triggers' envelope places them within the shortest trigger latency. One frame in 97
    /// is paired with a trigger sent 3 ms after its exposure, and moves nothing.
    @Test func triggeredFrames_arePlacedByTheTriggersSent_withinTheShortestTriggerLatency() throws {
        var mapping = CameraClockMapping()
        var generator = SplitMix(seed: 11)
        var errors: [Double] = []
        for frame in 0..<(25 * 30) {
            let sent = UInt64(1_000_000_000_000) + UInt64(frame) * 40_000_000
            let exposure = sent + 60_000 + generator.next() % 500_000
            let camera = UInt64(Double(exposure - 1_000_000_000_000) * (1 - 40e-6)) + 5_000_000_000
            mapping.add(cameraNs: camera, arrivalNs: exposure + 12_000_000 + generator.next() % 6_000_000)
            mapping.addTrigger(sentNs: frame % 97 == 0 ? exposure + 3_000_000 : sent, cameraNs: camera)
            if frame > 250, let placed = mapping.capture(cameraNs: camera) {
                errors.append(Double(Int64(bitPattern: placed &- exposure)))
            }
        }
        #expect(mapping.placedByTriggers)
        let earliest = errors.min() ?? .infinity, latest = errors.max() ?? .infinity
        let bracket = try #require(mapping.bracketNanoseconds)
        print("triggered camera clock: placed \(earliest / 1e3)…\(latest / 1e3) µs from the true exposure; bracket \(bracket / 1e6) ms")
        // Placed at most the shortest latency early (60 µs, plus what the envelope's line misses)
        // and never late: the bracket is about the 12 ms the arrivals alone would have added
        // (each envelope line misses by up to a few hundred µs).
        #expect(earliest > -120_000 && latest < 60_000, "\(earliest)…\(latest) ns")
        #expect(bracket > 11_500_000 && bracket < 12_700_000, "\(bracket) ns")
        mapping.forgetTriggers()
        #expect(!mapping.placedByTriggers)
    }

    @Test func aCameraClockThatJumps_startsTheMappingAgain() {
        var mapping = CameraClockMapping()
        for frame in 0..<60 {
            mapping.add(cameraNs: UInt64(frame) * 33_000_000, arrivalNs: 10_000_000_000 + UInt64(frame) * 33_000_000 + 1_000_000)
        }
        // The camera restarts: its clock counts from zero again.
        mapping.add(cameraNs: 5_000_000, arrivalNs: 10_000_000_000 + 60 * 33_000_000 + 1_000_000)
        #expect(mapping.restarts == 1)
        #expect(mapping.capture(cameraNs: 5_000_000) == 10_000_000_000 + 60 * 33_000_000 + 1_000_000)
    }

    struct SplitMix {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }
}

@Suite struct TriggersInFlightTests {
    @Test func aFrame_takesTheLatestTriggerSentBeforeIt_andLetsTheOlderOnesGo() {
        var triggers = TriggersInFlight()
        for instant in [1_000, 2_000, 3_000, 4_000] as [UInt64] { triggers.recordSent(instant) }
        #expect(triggers.pair(exposureNs: 2_500, toleranceNs: 0) == 2_000)
        #expect(triggers.count == 2, "the trigger of 1,000 started no frame that will come")
        #expect(triggers.pair(exposureNs: 2_900, toleranceNs: 200) == 3_000, "within the tolerance")
        #expect(triggers.pair(exposureNs: 3_500, toleranceNs: 0) == nil, "sent after the exposure: not its trigger")
        #expect(triggers.pair(exposureNs: 4_000, toleranceNs: 0) == 4_000)
        #expect(triggers.count == 0)
    }

    @Test func aTriggerThatNeverWentOut_isForgotten() {
        var triggers = TriggersInFlight()
        triggers.recordSent(1_000)
        triggers.recordSent(2_000)
        triggers.forget(2_000)
        #expect(triggers.pair(exposureNs: 2_500, toleranceNs: 0) == 1_000)
    }

    @Test func atMostCapacity_areKept() {
        var triggers = TriggersInFlight(capacity: 3)
        for instant in 1...5 { triggers.recordSent(UInt64(instant)) }
        #expect(triggers.count == 3)
    }
}
