import FleetCore
import FleetProtocol
import Testing

@Suite struct TakeSyncLedgerTests {
    let start: UInt64 = 100_000_000_000
    let second: UInt64 = 1_000_000_000

    func at(_ seconds: Double) -> UInt64 { UInt64(Double(start) + seconds * 1e9) }

    func ledger(_ cameras: [String] = ["cam-1", "cam-2"], _ requirements: TakeRequirements = TakeRequirements()) -> TakeSyncLedger {
        TakeSyncLedger(start: start, deviceIDs: cameras.map { ($0, "n-\($0)") }, requirements: requirements)
    }

    func sample(
        _ id: String, frames: UInt64, drops: DropTally = DropTally(), phase: Int64 = 0, _ change: (inout TakeSyncSample) -> Void = { _ in }
    )
        -> TakeSyncSample
    {
        var sample = TakeSyncSample(deviceID: id, nodeID: "n-\(id)", framesCaptured: frames, drops: drops, frameRate: 30, phaseNs: phase)
        change(&sample)
        return sample
    }

    /// Reports every second from -1 s to `seconds` + 1 s: 30 frames a second, all in phase.
    func healthy(_ ledger: inout TakeSyncLedger, seconds: Int, phase: (String, Int) -> Int64 = { _, _ in 0 }) {
        let ids = ledger.orderedCameras.map(\.deviceID)
        for tick in -1...(seconds + 1) {
            let frames = UInt64(1000 + 30 * (tick + 1))
            ledger.observe(ids.map { sample($0, frames: frames, phase: phase($0, tick)) }, at: at(Double(tick) + 0.5))
        }
    }

    @Test func aTakeWithNoRequirements_isReported_withItsFigures() {
        var take = ledger()
        take.stop(at: at(10))
        healthy(&take, seconds: 10)
        #expect(take.isComplete)
        #expect(take.verdict(ended: true) == TakeSyncVerdict(outcome: .reported))
        let camera = take.cameras["cam-1"]!
        #expect(camera.reports == 10, "reports at 0.5 … 9.5 s fall in the take")
        #expect(camera.framesCaptured == 300 && camera.framesExpected == 300, "10 s at 30 fps: the reports either side count for their share inside")
        #expect(camera.drops.total == 0 && camera.outOfPhaseNs == 0 && camera.notLockedNs == 0)
    }

    @Test func aHealthyTakeWithEveryRequirement_isCertified() {
        var take = ledger(["cam-1", "cam-2"], TakeRequirements(maxSpreadNs: 1_000_000, noDrops: true, clocksLocked: true, inPhase: true))
        take.stop(at: at(10))
        healthy(&take, seconds: 10) { id, _ in id == "cam-1" ? 20_000 : -30_000 }
        #expect(take.verdict(ended: true) == TakeSyncVerdict(outcome: .certified))
        #expect(take.spread.count > 0 && take.spread.max == 50_000)
    }

    @Test func whileTheTakeRecords_theVerdictIsRecording_withTheFailuresSoFar() {
        var take = ledger(["cam-1"], TakeRequirements(noDrops: true))
        take.observe([sample("cam-1", frames: 100)], at: at(-0.5))
        take.observe([sample("cam-1", frames: 130, drops: DropTally(late: 1))], at: at(0.5))
        let verdict = take.verdict(ended: false)
        #expect(verdict.outcome == .recording)
        #expect(verdict.failures == ["cam-1 dropped 1 frame (late 1)"])
    }

    @Test func drops_areCountedDuringTheTakeOnly_byReason() {
        var take = ledger(["cam-1", "cam-2"], TakeRequirements(noDrops: true))
        take.observe([sample("cam-2", frames: 10, drops: DropTally(late: 40))], at: at(-0.5))
        take.observe([sample("cam-2", frames: 40, drops: DropTally(late: 42, outOfBuffers: 1))], at: at(0.5))
        take.observe([sample("cam-2", frames: 70, drops: DropTally(late: 42, outOfBuffers: 1))], at: at(1.5))
        take.observe([sample("cam-1", frames: 70)], at: at(1.5))
        take.stop(at: at(2))
        take.observe([sample("cam-2", frames: 100, drops: DropTally(late: 99))], at: at(2.5))
        take.observe([sample("cam-2", frames: 130, drops: DropTally(late: 500))], at: at(3.5))
        #expect(take.cameras["cam-2"]!.drops == DropTally(late: 59, outOfBuffers: 1), "up to the first report after the stop, not after it")
        #expect(take.verdict(ended: true).failures == ["cam-2 dropped 60 frames (late 59, out of buffers 1)"])
    }

    @Test func anAgentRestart_startsItsCountersAgain_andNothingIsLostOrCountedTwice() {
        var take = ledger(["cam-1"], TakeRequirements(noDrops: true))
        take.observe([sample("cam-1", frames: 5000, drops: DropTally(late: 7))], at: at(-0.5))
        take.observe([sample("cam-1", frames: 5030, drops: DropTally(late: 7))], at: at(0.5))
        // A new agent process: counts from zero; it dropped two frames out of buffers.
        take.observe([sample("cam-1", frames: 20, drops: DropTally(outOfBuffers: 2))], at: at(1.5))
        take.observe([sample("cam-1", frames: 50, drops: DropTally(outOfBuffers: 2))], at: at(2.5))
        let camera = take.cameras["cam-1"]!
        #expect(camera.framesCaptured == 15 + 20 + 30, "half the first second was before the start")
        #expect(camera.drops == DropTally(outOfBuffers: 2))
    }

    @Test func aCameraAheadOfTheFirstReport_countsFromItsFirstReportInTheTake() {
        var take = ledger(["cam-1"])
        take.observe([sample("cam-1", frames: 900)], at: at(0.5))
        take.observe([sample("cam-1", frames: 930)], at: at(1.5))
        #expect(take.cameras["cam-1"]!.framesCaptured == 30 && take.cameras["cam-1"]!.framesExpected == 30)
    }

    @Test func framesCapturedBelowExpected_showWhenTheRateFell() {
        var take = ledger(["cam-1"])
        take.observe([sample("cam-1", frames: 0)], at: at(0.5))
        take.observe([sample("cam-1", frames: 15)], at: at(1.5))
        #expect(take.cameras["cam-1"]!.framesExpected == 30 && take.cameras["cam-1"]!.framesCaptured == 15)
    }

    @Test func aNodeWhoseClockWasNotLocked_failsClocksLocked_withHowLong() {
        var take = ledger(["cam-1", "cam-2"], TakeRequirements(clocksLocked: true))
        take.stop(at: at(10))
        for tick in 0..<10 {
            let sync: Capfleet_V1_ClockState.Sync = (3..<7).contains(tick) ? .synchronising : .locked
            take.observe(
                [
                    sample("cam-1", frames: 0) {
                        $0.sync = sync; $0.uncertaintyNs = UInt64(tick) * 1000
                    }
                ], at: at(Double(tick)))
            take.observe([sample("cam-2", frames: 0)], at: at(Double(tick)))
        }
        take.observe([sample("cam-1", frames: 0), sample("cam-2", frames: 0)], at: at(10.5))
        #expect(take.verdict(ended: true).failures == ["node n-cam-1's clock was synchronising for 4 s"])
        #expect(take.cameras["cam-1"]!.worstSync == .synchronising && take.cameras["cam-1"]!.maxUncertaintyNs == 9000)
    }

    @Test func theWorstClockStateIsKept_unsynchronisedOverSynchronising() {
        var take = ledger(["cam-1"], TakeRequirements(clocksLocked: true))
        take.observe([sample("cam-1", frames: 0) { $0.sync = .synchronising }], at: at(1))
        take.observe([sample("cam-1", frames: 0) { $0.sync = .unsynchronised }], at: at(1.5))
        take.observe([sample("cam-1", frames: 0)], at: at(2))
        #expect(take.cameras["cam-1"]!.worstSync == .unsynchronised)
        #expect(take.verdict(ended: false).failures == ["node n-cam-1's clock was unsynchronised for 1.5 s"])
    }

    @Test func aCameraOutOfPhase_failsInPhase_withTheTimeItWasOut() {
        var take = ledger(["cam-1", "cam-2"], TakeRequirements(inPhase: true))
        take.stop(at: at(5))
        for tick in 0..<5 {
            let state: Capfleet_V1_FrameAlignment.State = tick == 2 ? .aligning : .aligned
            take.observe([sample("cam-1", frames: 0) { $0.alignment = state }, sample("cam-2", frames: 0)], at: at(Double(tick) + 0.4))
        }
        take.observe([sample("cam-1", frames: 0), sample("cam-2", frames: 0)], at: at(5.4))
        #expect(take.verdict(ended: true) == TakeSyncVerdict(outcome: .failed, failures: ["cam-1 out of phase for 1 s"]))
        #expect(take.cameras["cam-1"]!.worstAlignment == .aligning)
    }

    @Test func aFreeRunningCamera_failsInPhase_asNotSteered() {
        var take = ledger(["cam-1"], TakeRequirements(inPhase: true))
        take.observe(
            [
                sample("cam-1", frames: 0) {
                    $0.alignment = .unaligned; $0.steered = false
                }
            ], at: at(1))
        take.stop(at: at(2))
        take.observe(
            [
                sample("cam-1", frames: 0) {
                    $0.alignment = .unaligned; $0.steered = false
                }
            ], at: at(3))
        #expect(take.verdict(ended: true).failures == ["cam-1 was not steered (unaligned): it cannot be held in phase"])
    }

    @Test func theTailAfterTheLastReport_takesTheStateOfTheFirstReportAfterTheStop() {
        var take = ledger(["cam-1"], TakeRequirements(inPhase: true))
        take.observe([sample("cam-1", frames: 0)], at: at(1))
        take.stop(at: at(1.8))
        take.observe([sample("cam-1", frames: 0) { $0.alignment = .aligning }], at: at(2))
        #expect(take.cameras["cam-1"]!.outOfPhaseNs == 800_000_000)
    }

    @Test func theSpreadAboveWhatWasAsked_failsTheTake_withItsP99() {
        var take = ledger(["cam-1", "cam-2"], TakeRequirements(maxSpreadNs: 1_000_000))
        take.stop(at: at(100))
        healthy(&take, seconds: 100) { id, _ in id == "cam-1" ? 0 : 1_800_000 }
        #expect(take.verdict(ended: true).failures == ["exposure spread p99 1.8 ms above the 1 ms asked (by the cameras' phases at each report)"])
    }

    @Test func freeRunningPhases_wrapAtTheInterval_andTheSmallestArcIsTheSpread() {
        let interval: Int64 = 33_333_333
        // +16 ms and −16 ms are 1.3 ms apart across the wrap, not 32 ms.
        #expect(TakeSyncLedger.circularRange([16_000_000, -16_000_000], intervalNs: interval) == 1_333_333)
        #expect(TakeSyncLedger.circularRange([1_000, -2_000, 500], intervalNs: interval) == 3_000)
        #expect(TakeSyncLedger.circularRange([0, 11_111_111, 22_222_222], intervalNs: interval) == 22_222_222)
    }

    @Test func camerasAtDifferentRates_areComparedOnAStraightLine() {
        var take = ledger(["cam-1", "cam-2"])
        take.observe([sample("cam-1", frames: 0, phase: 16_000_000)], at: at(1))
        take.observe([sample("cam-2", frames: 0, phase: -16_000_000) { $0.frameRate = 25 }], at: at(1.1))
        #expect(take.spread.max == 32_000_000)
    }

    @Test func aSilentCamerasOldPhase_isLeftOutOfTheSpread() {
        var take = ledger(["cam-1", "cam-2"])
        take.observe([sample("cam-1", frames: 0, phase: 5_000_000)], at: at(0.5))
        take.observe([sample("cam-2", frames: 0, phase: 0)], at: at(10))
        #expect(take.spread.count == 0)
    }

    @Test func aCameraWithNoGrid_makesTheSpreadUnknown_whenASpreadIsAsked() {
        var take = ledger(["cam-1", "cam-2"], TakeRequirements(maxSpreadNs: 1_000_000))
        take.observe(
            [
                sample("cam-1", frames: 0),
                sample("cam-2", frames: 0) {
                    $0.alignment = .off; $0.steered = false
                },
            ], at: at(1))
        #expect(
            take.verdict(ended: false).failures == [
                "cam-2 had no place on the alignment grid: its spread against the others is unknown (capfleet align)"
            ])
    }

    @Test func aCameraNeverHeardFrom_failsATakeThatAsksAnything() {
        var take = ledger(["cam-1", "cam-2"], TakeRequirements(noDrops: true))
        take.observe([sample("cam-1", frames: 0)], at: at(1))
        #expect(take.verdict(ended: true).failures == ["cam-2 sent no status during the take: nothing shows what it kept"])
    }

    @Test func everyRequirementNotMet_hasAReasonOfItsOwn() {
        var take = ledger(["cam-1", "cam-2"], TakeRequirements(maxSpreadNs: 100_000, noDrops: true, clocksLocked: true, inPhase: true))
        take.observe([sample("cam-1", frames: 0), sample("cam-2", frames: 0)], at: at(-0.5))
        take.observe(
            [
                sample("cam-1", frames: 30, drops: DropTally(discontinuity: 3)) { $0.sync = .synchronising },
                sample("cam-2", frames: 30, phase: 400_000) { $0.alignment = .aligning },
            ], at: at(0.5))
        #expect(take.verdict(ended: true).failures.count == 4)
    }

    @Test func reportsAfterTheStopsFirstOne_changeNothing() {
        var take = ledger(["cam-1"])
        take.observe([sample("cam-1", frames: 0)], at: at(0.5))
        take.stop(at: at(1))
        take.observe([sample("cam-1", frames: 30)], at: at(1.5))
        let closed = take.cameras["cam-1"]!
        take.observe([sample("cam-1", frames: 60, drops: DropTally(late: 9))], at: at(2.5))
        #expect(take.cameras["cam-1"]! == closed)
        #expect(take.isComplete)
    }

    @Test func aTakeResumedAfterACoordinatorRestart_countsOnlyFromTheRestart() {
        var take = ledger(["cam-1"], TakeRequirements(inPhase: true))
        take.resume(at: at(60))
        take.observe([sample("cam-1", frames: 0) { $0.alignment = .aligning }], at: at(61))
        #expect(take.cameras["cam-1"]!.outOfPhaseNs == second, "not the minute before the restart")
    }

    @Test func devicesOfOtherTakes_areIgnored() {
        var take = ledger(["cam-1"])
        take.observe([sample("cam-9", frames: 0)], at: at(1))
        #expect(take.cameras.count == 1 && take.cameras["cam-1"]!.reports == 0)
    }

    @Test func writerHeadroom_isOneLessTheFullestTheQueueGot() {
        var take = ledger(["cam-1", "cam-2"])
        take.observe(
            [
                sample("cam-1", frames: 0) {
                    $0.takeQueuePeak = 12; $0.takeQueueCapacity = 48
                }
            ], at: at(1))
        take.observe(
            [
                sample("cam-1", frames: 0) {
                    $0.takeQueuePeak = 6; $0.takeQueueCapacity = 48
                }
            ], at: at(2))
        take.observe([sample("cam-2", frames: 0)], at: at(2))
        #expect(take.cameras["cam-1"]!.writerHeadroom == 0.75)
        #expect(take.cameras["cam-2"]!.writerHeadroom == nil, "an agent that never said")
    }

    @Test func theReportOnTheWire_carriesVerdictFiguresAndRequirements() {
        var take = ledger(["cam-1", "cam-2"], TakeRequirements(noDrops: true))
        take.stop(at: at(3))
        healthy(&take, seconds: 3)
        let report = take.report(ended: true)
        #expect(report.verdict == .certified && report.requirements.noDrops)
        #expect(report.cameras.map(\.deviceID) == ["cam-1", "cam-2"])
        #expect(report.cameras[0].framesCaptured == 90 && report.cameras[0].statusReports == 3 && report.cameras[0].writerHeadroom == -1)
        #expect(take.report(ended: false).verdict == .recording)
    }
}

@Suite struct MagnitudeHistogramTests {
    @Test func percentiles_areNeverBelowTheTrueValue_norMoreThanThreePercentAbove() {
        var histogram = MagnitudeHistogram()
        for value in 1...10_000 { histogram.add(UInt64(value) * 1_000) }
        #expect(histogram.median >= 5_000_000 && Double(histogram.median) < 5_000_000 * 1.032)
        #expect(histogram.p99 >= 9_900_000 && Double(histogram.p99) < 9_900_000 * 1.032)
        #expect(histogram.max == 10_000_000 && histogram.count == 10_000)
    }

    @Test func memory_doesNotGrowWithTheNumberOfSamples() {
        var histogram = MagnitudeHistogram()
        for value in 0..<200_000 { histogram.add(UInt64(value % 50_000) * 997) }
        #expect(histogram.bucketsInUse < 600)
    }

    @Test func smallValues_areExact_andAnEmptyHistogramSaysZero() {
        var histogram = MagnitudeHistogram()
        #expect(histogram.median == 0)
        for value: UInt64 in [3, 3, 7] { histogram.add(value) }
        #expect(histogram.median == 3 && histogram.p99 == 7)
        histogram.add(.max)
        #expect(histogram.max == .max && histogram.quantile(1) == .max)
    }
}

@Suite struct TakeSyncVerdictTests {
    @Test func durationsAndSpreads_areSpokenInTheirUnit() {
        #expect(TakeSyncVerdict.spoken(4_200_000_000) == "4.2 s")
        #expect(TakeSyncVerdict.spoken(1_000_000) == "1 ms")
        #expect(TakeSyncVerdict.spoken(1_840_000) == "1.8 ms")
        #expect(TakeSyncVerdict.spoken(350_000) == "350 µs")
        #expect(TakeSyncVerdict.spoken(80) == "80 ns")
    }

    @Test func aCamerasExposureTiming_isReportedAsItsAgentSaidIt_eachChangeKept() {
        // From the alignment reports: what each kind of camera says.
        let wired = Capfleet_V1_FrameAlignment.with {
            $0.state = .aligned
            $0.triggered = true
            $0.triggerDelivery = .hardwareLine
            $0.triggerLine = "Line0"
            $0.lineSourceDeviceID = "cam-1"
        }
        #expect(TakeSyncSample.exposureTiming(of: wired) == "Line0 from cam-1")
        var generator = wired
        generator.lineSourceDeviceID = ""
        #expect(TakeSyncSample.exposureTiming(of: generator) == "Line0 from an external generator")
        var action = wired
        action.triggerDelivery = .scheduledAction
        #expect(TakeSyncSample.exposureTiming(of: action) == "scheduled action commands")
        #expect(
            TakeSyncSample.exposureTiming(
                of: .with {
                    $0.state = .aligned; $0.steered = true
                }) == "steered")
        #expect(TakeSyncSample.exposureTiming(of: .with { $0.state = .off }) == "free-running")

        let start: UInt64 = 100_000_000_000
        var take = TakeSyncLedger(start: start, deviceIDs: [("cam-1", "n-1")])
        for (tick, timing) in ["software triggers", "software triggers", "scheduled action commands"].enumerated() {
            var sample = TakeSyncSample(deviceID: "cam-1", nodeID: "n-1", framesCaptured: UInt64(1000 + 30 * tick))
            sample.exposureTiming = timing
            take.observe([sample], at: start + UInt64(tick) * 1_000_000_000 + 500_000_000)
        }
        #expect(take.cameras["cam-1"]?.exposureTiming == "software triggers, then scheduled action commands")
        #expect(take.report(ended: false).cameras.first?.exposureTiming == "software triggers, then scheduled action commands")
    }
}
