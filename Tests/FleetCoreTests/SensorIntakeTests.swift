import FleetCore
import FleetProtocol
import Testing

/// The agent's sensor intake (sensors.md): samples checked one by one, put in fleet time,
/// held back without consent, batched, and every refusal counted under its reason.
@Suite struct SensorIntakeTests {
    static let now: UInt64 = 100_000_000_000
    static let imu = (name: "imu0", deviceID: "sen-1a2b3c4d-imu0")

    static func intake(allowed: Bool = true) -> SensorIntake {
        var intake = SensorIntake(nodeID: "node-1a2b3c4d", streams: [imu, (name: "cues", deviceID: "sen-1a2b3c4d-cues")])
        intake.setAllowed(allowed, deviceID: imu.deviceID)
        return intake
    }

    static func message(
        _ samples: [(UInt64, [Double])], stream: String = "imu0", channels: [String] = ["ax", "ay", "az"]
    ) -> [UInt8] {
        let message = Capfleet_V1_SensorSamples.with {
            $0.stream = stream
            $0.channels = channels
            $0.samples = samples.map { time, values in
                .with {
                    $0.monotonicNs = time
                    $0.values = values
                }
            }
        }
        return try! message.serializedBytes()
    }

    /// Fleet time here: the monotonic instant plus 5 s.
    static func fleet(_ monotonic: UInt64) -> UInt64? { monotonic + 5_000_000_000 }

    @Test func acceptedSamples_leaveInFleetTime_onceTheFlushIntervalPassed() {
        var intake = Self.intake()
        let samples = (0..<4).map { (Self.now - 20_000_000 + UInt64($0) * 5_000_000, [0.1, 0.2, 9.8]) }
        let outcome = intake.received(Self.message(samples), now: Self.now, fleetTime: Self.fleet)
        #expect(outcome.refusal == nil && outcome.batches.isEmpty, "nothing leaves before the interval")
        #expect(intake.due(now: Self.now + 49_000_000).isEmpty)
        #expect(intake.nextDue == Self.now + 50_000_000)
        let batches = intake.due(now: Self.now + 50_000_000)
        try! #require(batches.count == 1)
        let batch = batches[0]
        #expect(batch.deviceID == Self.imu.deviceID && batch.stream == "imu0" && batch.nodeID == "node-1a2b3c4d")
        #expect(batch.channels == ["ax", "ay", "az"] && batch.readings.count == 4 && batch.received == 4)
        for (reading, sample) in zip(batch.readings, samples) {
            #expect(reading.monotonicNs == sample.0 && reading.fleetTimeNs == sample.0 + 5_000_000_000 && reading.values == sample.1)
        }
        #expect(intake.nextDue == nil && intake.due(now: Self.now + 200_000_000).isEmpty, "a batch leaves once")
    }

    @Test func eachBadSample_isRefusedUnderItsReason_andTheRestOfItsMessageGoesOn() {
        var intake = Self.intake()
        let t = Self.now - 1_000_000_000
        let outcome = intake.received(
            Self.message([
                (t, [1, 2, 3]),
                (t + 1, [1, 2]),  // value_count
                (t + 2, [1, .nan, 3]),  // not_finite
                (t, [1, 2, 3]),  // out_of_order: not later than the first
                (Self.now - 11_000_000_000, [1, 2, 3]),  // out_of_time: behind
                (Self.now + 2_000_000_000, [1, 2, 3]),  // out_of_time: ahead
                (t + 3, [4, 5, 6]),
            ]), now: Self.now, fleetTime: Self.fleet)
        #expect(outcome.refused == 5 && outcome.refusal == .valueCount, "the first refusal names the reason: \(outcome.detail)")
        #expect(outcome.detail.contains("imu0") && outcome.detail.contains("2 values"))
        let counters = intake.counters(deviceID: Self.imu.deviceID)
        #expect(counters?.received == 2 && counters?.refused == 5)
        #expect(intake.due(now: Self.now + 50_000_000).first?.readings.map(\.monotonicNs) == [t, t + 3])

        // A sender on CLOCK_REALTIME is told which clock to use.
        let realtime = intake.received(Self.message([(1_790_000_000_000_000_000, [1, 2, 3])]), now: Self.now, fleetTime: Self.fleet)
        #expect(realtime.refusal == .outOfTime && realtime.detail.contains("CLOCK_MONOTONIC"))
    }

    @Test func messagesThatNameNoStream_areCountedForTheNode() {
        var intake = Self.intake()
        let garbage = intake.received([0xFF, 0xFF, 0xFF, 0x01], now: Self.now, fleetTime: Self.fleet)
        #expect(garbage.refusal == .undecodable)
        let unknown = intake.received(Self.message([(Self.now, [1, 2, 3])], stream: "gps"), now: Self.now, fleetTime: Self.fleet)
        #expect(unknown.refusal == .unknownStream && unknown.detail.contains("cues, imu0"), "\(unknown.detail)")
        #expect(intake.messagesRefused == 2 && intake.counters(deviceID: Self.imu.deviceID)?.refused == 0)
    }

    @Test func wholeMessagesAreRefused_whenTooLongOrTheirChannelsAreBad() {
        var intake = Self.intake()
        let many = (0..<1001).map { (Self.now - 2_000_000_000 + UInt64($0) * 1000, [1.0, 2, 3]) }
        #expect(intake.received(Self.message(many), now: Self.now, fleetTime: Self.fleet).refusal == .tooManySamples)
        let repeated = intake.received(Self.message([(Self.now, [1, 2, 3])], channels: ["x", "x", "z"]), now: Self.now, fleetTime: Self.fleet)
        #expect(repeated.refusal == .badChannels && repeated.refused == 1)
        #expect(intake.counters(deviceID: Self.imu.deviceID)?.refused == 1002)
    }

    @Test func withoutConsent_samplesAreCountedAndDropped_andRevocationDropsWhatWaits() {
        var intake = Self.intake(allowed: false)
        _ = intake.received(Self.message([(Self.now - 10, [1, 2, 3])]), now: Self.now, fleetTime: Self.fleet)
        #expect(intake.nextDue == nil && intake.counters(deviceID: Self.imu.deviceID)?.withheld == 1)

        intake.setAllowed(true, deviceID: Self.imu.deviceID)
        _ = intake.received(Self.message([(Self.now - 5, [1, 2, 3]), (Self.now - 4, [1, 2, 3])]), now: Self.now, fleetTime: Self.fleet)
        #expect(intake.nextDue != nil)
        intake.setAllowed(false, deviceID: Self.imu.deviceID)
        #expect(intake.nextDue == nil && intake.due(now: Self.now + 1_000_000_000).isEmpty, "a revocation sends nothing more")
        #expect(intake.counters(deviceID: Self.imu.deviceID)?.withheld == 3 && intake.counters(deviceID: Self.imu.deviceID)?.received == 3)
    }

    @Test func aFullBatchLeavesAtOnce_andNewChannelNamesStartANewBatch() {
        var intake = Self.intake()
        let base = Self.now - 5_000_000_000
        let full = (0..<500).map { (base + UInt64($0) * 1000, [1.0, 2, 3]) }
        let first = intake.received(Self.message(full), now: Self.now, fleetTime: Self.fleet)
        #expect(first.batches.count == 1 && first.batches[0].readings.count == 500)

        _ = intake.received(Self.message([(base + 600_000, [1, 2, 3])]), now: Self.now, fleetTime: Self.fleet)
        let renamed = intake.received(Self.message([(base + 700_000, [7, 8])], channels: ["x", "y"]), now: Self.now, fleetTime: Self.fleet)
        #expect(renamed.batches.count == 1 && renamed.batches[0].channels == ["ax", "ay", "az"] && renamed.batches[0].readings.count == 1)
        // Left out, the channels are the stream's last ones.
        _ = intake.received(Self.message([(base + 800_000, [9, 10])], channels: []), now: Self.now, fleetTime: Self.fleet)
        let batch = intake.due(now: Self.now + 50_000_000)
        #expect(batch.first?.channels == ["x", "y"] && batch.first?.readings.count == 2)
    }

    @Test func aBatchTheChannelCouldNotTake_isCountedUnsent() {
        var intake = Self.intake()
        _ = intake.received(Self.message([(Self.now - 10, [1, 2, 3])]), now: Self.now, fleetTime: { _ in nil })
        let batch = intake.due(now: Self.now + 50_000_000)[0]
        #expect(batch.readings[0].fleetTimeNs == 0, "no fleet time yet: 0")
        intake.unsent(batch)
        #expect(intake.counters(deviceID: Self.imu.deviceID)?.unsent == 1)
    }

    @Test func streamNames_keepToTheirRule() {
        #expect(SensorStreamName.problem(with: "imu0") == nil && SensorStreamName.problem(with: "gpio_17-edge") == nil)
        for bad in ["", "IMU", "-imu", "imu.0", "imu 0", String(repeating: "a", count: 33)] {
            #expect(SensorStreamName.problem(with: bad) != nil, "\(bad)")
        }
        #expect(SensorStreamName.deviceID(nodeShortID: "1a2b3c4d", stream: "imu0") == "sen-1a2b3c4d-imu0")
        #expect(DeviceIdentityRule.problem(with: "sen-gige-1", kind: .external) != nil, "sen- belongs to sensor streams")
    }
}
