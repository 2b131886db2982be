import FleetCapture
import FleetCore
import FleetProtocol
import Testing

@testable import FleetAgent

/// A device's alignment as the agent keeps it, closing the loop on a simulated sensor (the
/// 1080p sensor model, 35 ppm fast, ±10 µs of jitter) whose fleet time is its true time.
@Suite struct FrameAlignmentStateTests {
    static let mode = SensorMode.fullHD
    /// 25 fps on the grid: 1350 lines of 29.63 µs.
    static let timing = FrameLengthTiming(
        nominalLineTime: mode.lineTime(horizontalBlanking: 280), frameLengthRange: mode.frameLengthRange, nominalFrameLength: 1350)

    static func sensor(startingAt start: UInt64) throws -> SensorModel {
        var sensor = SensorModel(mode: mode, frequencyErrorPPM: 35, jitterBound: 10_000, seed: 7, start: start)
        try sensor.set(.verticalBlanking, to: Int64(timing.nominalFrameLength - mode.height), at: start)
        return sensor
    }

    /// Runs `frames` frames of `sensor`, each observed and its answer set as the agent does;
    /// the wire state and phase after each.
    static func run(
        _ frames: Int, _ sensor: inout SensorModel, _ state: FrameAlignmentState, clockLocked: Bool = true
    ) throws -> [(state: Capfleet_V1_FrameAlignment.State, phase: Int64)] {
        var seen: [(Capfleet_V1_FrameAlignment.State, Int64)] = []
        for _ in 0..<frames {
            let frame = sensor.nextFrame()
            if let lines = state.observe(
                sequence: frame.sequence, fleetTime: frame.exposureStart, frameRate: 25, clockLocked: clockLocked, timing: timing)
            {
                try sensor.set(.verticalBlanking, to: Int64(lines - mode.height), at: frame.readoutEnd)
            }
            seen.append((state.wire.state, state.wire.phaseNs))
        }
        return seen
    }

    @Test func aSteerableSensor_isBroughtOntoItsSlots_andSaysAlignedOnceTheLoopHasLocked() throws {
        let state = FrameAlignmentState()
        state.set(FrameAligner(origin: 1_000_000_000), steerable: true)
        // 12.3 ms off its slot at first.
        var sensor = try Self.sensor(startingAt: 50_000_000_000 + 12_345_678)
        let seen = try Self.run(750, &sensor, state)
        #expect(seen.first?.state == .aligning)
        let firstAligned = try #require(seen.firstIndex { $0.state == .aligned }, "aligned within 30 s of frames")
        print("frame alignment: a 35 ppm sensor 12.3 ms off its slot is aligned after \(firstAligned) frames (\(Double(firstAligned) / 25) s)")
        #expect(firstAligned <= 50, "about a second at 25 fps, not \(firstAligned) frames")
        let settled = seen.suffix(500)
        #expect(settled.allSatisfy { $0.state == .aligned }, "it stays aligned")
        let worst = settled.map { abs($0.phase) }.max() ?? 0
        print("frame alignment: worst phase over the last 20 s \(worst) ns")
        // Half a line (14.8 µs) and the jitter (10 µs) bound a frame; 50 µs leaves the phase estimate room.
        #expect(worst <= 50_000, "\(worst) ns")
    }

    @Test func withoutALockedClock_theSensorIsNotSteered_andIsNotCalledAligned() throws {
        let state = FrameAlignmentState()
        state.set(FrameAligner(origin: 1_000_000_000), steerable: true)
        var sensor = try Self.sensor(startingAt: 50_000_000_000 + 12_345_678)
        let seen = try Self.run(100, &sensor, state, clockLocked: false)
        #expect(seen.allSatisfy { $0.state == .aligning })
        #expect(sensor.frameLengthLines == 1350, "its frame length is left as it was")
    }

    @Test func aSourceThatCannotSetItsFrameLength_isUnaligned_andStillReportsItsPhase() throws {
        let state = FrameAlignmentState()
        state.set(FrameAligner(origin: 1_000_000_000), steerable: false)
        var sensor = try Self.sensor(startingAt: 50_000_000_000 + 12_345_678)
        let seen = try Self.run(10, &sensor, state)
        #expect(seen.allSatisfy { $0.state == .unaligned })
        #expect(seen.last.map { abs($0.phase) > 1_000_000 } == true, "its phase, far from the slot: \(seen.last?.phase ?? 0) ns")
        state.set(nil, steerable: false)
        #expect(state.wire.state == .off)
    }

    @Test func aSteeredSensor_reportsItsPhaseFigures_itsOscillator_andTheSpellItTookToLock() throws {
        let state = FrameAlignmentState()
        state.set(FrameAligner(origin: 1_000_000_000), steerable: true)
        var sensor = try Self.sensor(startingAt: 50_000_000_000 + 12_345_678)
        _ = try Self.run(750, &sensor, state)
        let wire = state.wire
        #expect(wire.steered)
        #expect(wire.state == .aligned)
        #expect(wire.notAlignedReason.isEmpty)
        #expect(wire.phaseFrames == 750, "30 s of frames, all within the minute")
        // The first frames, milliseconds off, are in the window: the largest says so, the median not.
        #expect(wire.phaseMaxNs > 1_000_000, "\(wire.phaseMaxNs) ns")
        #expect(wire.phaseMedianNs < 30_000, "\(wire.phaseMedianNs) ns")
        #expect(abs(wire.frequencyErrorPpm - 35) < 3, "the oscillator learnt: \(wire.frequencyErrorPpm) ppm")
        #expect(wire.outOfPhaseNs > 0 && wire.outOfPhaseNs < 5_000_000_000, "out of phase until it locked: \(wire.outOfPhaseNs) ns")
        #expect(wire.outOfPhaseSinceFleetNs == 0, "in phase now")
    }

    @Test func aFreeRunningSource_reportsItsDriftAgainstTheGrid_andWhy() throws {
        let state = FrameAlignmentState()
        state.set(FrameAligner(origin: 1_000_000_000), steerable: false)
        var sensor = try Self.sensor(startingAt: 50_000_000_000 + 12_345_678)
        _ = try Self.run(100, &sensor, state)
        let wire = state.wire
        #expect(!wire.steered)
        #expect(wire.notAlignedReason.contains("free-running"))
        // 35 ppm fast on a 40 ms grid: each second's frames start 35 µs earlier.
        #expect(abs(wire.driftNsPerS + 35_000) < 3_000, "\(wire.driftNsPerS) ns/s")
        #expect(wire.frequencyErrorPpm == 0, "nothing learnt of an oscillator nobody steers")
    }

    @Test func withoutALockedClock_theReasonSaysSo() throws {
        let state = FrameAlignmentState()
        state.set(FrameAligner(origin: 1_000_000_000), steerable: true)
        var sensor = try Self.sensor(startingAt: 50_000_000_000)
        _ = try Self.run(5, &sensor, state, clockLocked: false)
        #expect(state.wire.notAlignedReason.contains("clock to lock"))
        #expect(state.wire.phaseFrames == 0, "phases on a clock not locked are left out")
    }

    /// A triggered camera (clock.md, "Triggered cameras"): aligned while its triggers leave on
    /// time, whatever its frames' own phase; a refusal of trigger mode says why it is not.
    @Test func aTriggeredCamera_isJudgedByItsTriggers_andReportsTheirLateness() {
        let origin: UInt64 = 1_000_000_000_000, interval: UInt64 = 40_000_000
        let state = FrameAlignmentState()
        state.set(FrameAligner(origin: origin), steerable: false, triggered: true)
        #expect(state.wire.state == .aligning && state.wire.triggered && !state.wire.steered)
        #expect(state.wire.notAlignedReason.contains("no trigger fired yet"), "\(state.wire.notAlignedReason)")
        for slot in 0..<100 {
            let fleet = origin + UInt64(slot) * interval
            state.triggerFired(slotFleet: fleet, lateness: UInt64(slot % 10) * 1_000, interval: interval)
            // Each frame exposes 1.5 ms after its trigger (the camera's latency): its phase, not its alignment.
            _ = state.observe(sequence: UInt64(slot), fleetTime: fleet + 1_500_000, frameRate: 25, clockLocked: true, timing: nil)
        }
        state.triggerMissed()
        var wire = state.wire
        #expect(wire.state == .aligned && wire.notAlignedReason.isEmpty, "\(wire.notAlignedReason)")
        #expect(wire.triggersFired == 100 && wire.triggersMissed == 1)
        #expect(wire.triggerLatenessMedianNs == 4_000 && wire.triggerLatenessMaxNs == 9_000, "\(wire)")
        #expect(wire.phaseNs == 1_500_000 && wire.phaseMedianNs == 1_500_000)
        // A trigger that left late: aligning, saying how late.
        state.triggerFired(slotFleet: origin + 100 * interval, lateness: 250_000, interval: interval)
        wire = state.wire
        #expect(wire.state == .aligning && wire.notAlignedReason.contains("+250.0 µs after its slot"), "\(wire.notAlignedReason)")
        // A camera that refused trigger mode from the start.
        let refused = FrameAlignmentState()
        refused.set(FrameAligner(origin: origin), steerable: false, triggered: true)
        refused.triggerModeFailed("device cam cannot be triggered: TriggerMode is read-only")
        #expect(refused.wire.state == .unaligned && refused.wire.triggerError.contains("read-only"))
        #expect(refused.wire.notAlignedReason.contains("would not be triggered"))
    }
}
