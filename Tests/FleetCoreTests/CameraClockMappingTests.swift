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
