import FleetCore
import Testing

/// One device's state on its agent, driven as the agent drives it, with a fake wall clock.
@Suite struct DeviceStateTests {
    /// Unix milliseconds that move only when a test says so.
    struct FakeClock {
        var now: Int64 = 1_750_000_000_000
        mutating func advance(milliseconds: Int64) { now += milliseconds }
    }

    var clock = FakeClock()
    var device = DeviceState(consent: .authorized)
    var sequence: UInt64 = 0

    /// A capturing device: welcomed, and its source reported running.
    init() {
        _ = device.handle(.captureWanted, at: clock.now)
        _ = device.handle(.sourceStarted, at: clock.now)
    }

    mutating func step(_ event: DeviceState.Event) -> [DeviceState.Action] {
        device.handle(event, at: clock.now)
    }

    /// The next frame in sequence, captured at `fleetTime`.
    mutating func frame(
        atFleet fleetTime: UInt64? = nil, pixelFormat: PixelFormat = .yuyv, outOfBuffers: UInt64 = 0,
        skipping: UInt64 = 0, drops: DropTally = DropTally()
    ) -> DeviceState.FrameDecision {
        sequence += 1 + skipping
        return device.frameCaptured(
            .init(
                sequence: sequence, outOfBufferDrops: outOfBuffers, fleetTime: fleetTime, deviceDrops: drops,
                pixelFormat: pixelFormat, width: 640, height: 480))
    }

    // MARK: Consent and takes

    @Test mutating func consentRevokedDuringTake_stopsRealFramesAndTheTakeInOneStep() {
        _ = step(.takeBegan(takeID: "t1", startFleet: 1_000, deviceDrops: DropTally()))
        #expect(frame(atFleet: 1_000).actions == [.realFrames(flowing: true)])

        let actions = step(.consentChanged(.denied, deviceDrops: DropTally(late: 9, outOfBuffers: 2)))

        #expect(
            actions == [
                .realFrames(flowing: false),
                .endTake(TakeEnd(takeID: "t1", drops: DropTally(late: 0, outOfBuffers: 2), reason: "consent denied", withholding: true)),
            ])
        #expect(device.take == nil && !device.realFramesFlowing && !device.isRecording)
        let next = frame(atFleet: 2_000)
        #expect(next.pixels == .black && next.recordedFor == nil, "the next frame is black and in no take")
    }

    @Test mutating func blackFramesUntilConsentIsGranted_thenRealFromTheNextFrame_andTheLightGoesOnOnce() {
        _ = step(.consentChanged(.notDetermined, deviceDrops: DropTally()))
        #expect(frame().pixels == .black)
        #expect(frame().actions.isEmpty, "no light while frames are black")
        #expect(step(.consentChanged(.authorized, deviceDrops: DropTally())).isEmpty)
        let first = frame()
        #expect(first.pixels == .real && first.consent == .authorized && first.actions == [.realFrames(flowing: true)])
        #expect(frame().actions.isEmpty, "the light is already on")
    }

    @Test mutating func aFormatThatCannotBeMadeBlack_isWithheldWhileConsentIsMissing() {
        _ = step(.consentChanged(.restricted, deviceDrops: DropTally()))
        #expect(frame(pixelFormat: PixelFormat("H264")).pixels == .withheld)
        #expect(frame(pixelFormat: .mjpeg).pixels == .black, "JPEG can be made black")
    }

    @Test mutating func aTakeKeepsFramesFromItsStart_andEndsWithTheFirstFrameAtItsStop() {
        _ = step(.takeBegan(takeID: "t1", startFleet: 1_000, deviceDrops: DropTally()))
        #expect(frame(atFleet: 999).recordedFor == nil, "before the start")
        #expect(frame().recordedFor == nil, "without fleet time a frame cannot be placed in a take")
        #expect(frame(atFleet: 1_000).recordedFor?.takeID == "t1")
        #expect(
            step(.takeStopAsked(takeID: "t1", stopFleet: 3_000, nowFleet: 2_000, cause: .stopped, deviceDrops: DropTally())).isEmpty,
            "a stop in the future waits for its instant")
        #expect(frame(atFleet: 2_500).recordedFor?.takeID == "t1")
        let last = frame(atFleet: 3_000)
        #expect(last.recordedFor == nil)
        #expect(last.actions == [.endTake(TakeEnd(takeID: "t1", drops: DropTally(), reason: "stopped", withholding: false))])
        #expect(device.take == nil)
    }

    @Test mutating func aStopInstantThatPassesWithNoFrame_endsTheTakeByTheClock() {
        _ = step(.takeBegan(takeID: "t1", startFleet: 1_000, deviceDrops: DropTally()))
        _ = step(.takeStopAsked(takeID: "t1", stopFleet: 3_000, nowFleet: 2_000, cause: .stopped, deviceDrops: DropTally()))
        #expect(step(.takeStopDue(nowFleet: 2_999, deviceDrops: DropTally())).isEmpty)
        #expect(
            step(.takeStopDue(nowFleet: 3_000, deviceDrops: DropTally())) == [
                .endTake(TakeEnd(takeID: "t1", drops: DropTally(), reason: "stopped", withholding: false))
            ])
    }

    @Test mutating func aTakesDrops_countFromItsStart_withHandOffDrops_andWithoutTheLivePathsLateDrops() {
        let before = DropTally(late: 50, outOfBuffers: 3, discontinuity: 4)
        _ = step(.takeBegan(takeID: "t1", startFleet: 0, deviceDrops: before))
        _ = step(.takeHandoffDropped(takeID: "t1", reason: .outOfBuffers, count: 1))
        _ = step(.takeHandoffDropped(takeID: "another take", reason: .outOfBuffers, count: 1))
        let decision = frame(atFleet: 10, drops: DropTally(late: 80, outOfBuffers: 5, discontinuity: 4))
        #expect(decision.recordedFor?.drops == DropTally(late: 0, outOfBuffers: 3, discontinuity: 0))
    }

    @Test mutating func framesTheTakesEncoderCouldNotTake_countAsEncoderLate_notAsOutOfBuffers() {
        _ = step(.takeBegan(takeID: "t1", startFleet: 0, deviceDrops: DropTally()))
        #expect(
            step(.takeHandoffDropped(takeID: "t1", reason: .encoderLate, count: 3)) == [.countTakeDrops(reason: .encoderLate, count: 3)],
            "the device counts them as the take does")
        _ = step(.takeHandoffDropped(takeID: "t1", reason: .outOfBuffers, count: 1))
        #expect(frame(atFleet: 10).recordedFor?.drops == DropTally(outOfBuffers: 1, encoderLate: 3))
    }

    /// A frame its recording path refused once the take had ended (its path closing) is
    /// neither the part's nor the device's drop: both counts stay equal.
    @Test mutating func aRefusalAfterTheTakeEnded_isCountedNowhere() {
        _ = step(.takeBegan(takeID: "t1", startFleet: 0, deviceDrops: DropTally()))
        _ = step(.takeStopAsked(takeID: "t1", stopFleet: 3_000, nowFleet: 2_000, cause: .stopped, deviceDrops: DropTally()))
        #expect(step(.takeStopDue(nowFleet: 3_000, deviceDrops: DropTally())).count == 1, "the take ends")
        #expect(step(.takeHandoffDropped(takeID: "t1", reason: .encoderLate, count: 1)) == [])
    }

    @Test mutating func theSameTakeSaidAgainAtRegistration_keepsWhatIsUnderWay() {
        _ = step(.takeBegan(takeID: "t1", startFleet: 1_000, deviceDrops: DropTally()))
        _ = step(.takeHandoffDropped(takeID: "t1", reason: .outOfBuffers, count: 1))
        #expect(
            step(.takeBegan(takeID: "t1", startFleet: 5_000, deviceDrops: DropTally(outOfBuffers: 7))) == [.beginTake(takeID: "t1")],
            "the recording path hears of it again")
        #expect(device.take?.start == 1_000)
        #expect(frame(atFleet: 1_500).recordedFor?.drops == DropTally(outOfBuffers: 1))
    }

    // MARK: Frames lost

    @Test mutating func aSequenceJump_countsDiscontinuities_butNotFramesTheSourceCountedAsOutOfBuffers() {
        _ = frame()
        #expect(frame(skipping: 3).discontinuities == 3)
        let decision = frame(outOfBuffers: 2, skipping: 3, drops: DropTally(discontinuity: 3))
        #expect(decision.discontinuities == 1, "two of the three were out-of-buffer drops")
        #expect(decision.deviceDrops.discontinuity == 4)
    }

    // MARK: Capture lifecycle

    @Test mutating func aSecondWelcome_startsNothingMore() {
        #expect(step(.captureWanted).isEmpty)
        #expect(device.isCapturing)
    }

    @Test mutating func revocation_discardsFramesAtOnce_evenBeforeTheSourceHasStopped() {
        _ = frame()
        #expect(step(.captureUnwanted) == [.realFrames(flowing: false), .stopSource])
        #expect(frame().pixels == .discarded)
        #expect(step(.sourceStopped).isEmpty)
        #expect(!device.isStreaming)
    }

    @Test mutating func aStopAskedWhileTheSourceStarts_stopsItOnceItHasStarted() {
        var starting = DeviceState(consent: .authorized)
        #expect(starting.handle(.captureWanted, at: clock.now) == [.startSource])
        #expect(starting.handle(.captureUnwanted, at: clock.now).isEmpty, "one start or stop at a time")
        #expect(starting.handle(.sourceStarted, at: clock.now) == [.stopSource])
        #expect(starting.handle(.sourceStopped, at: clock.now).isEmpty)
        #expect(starting.source == .stopped)
    }

    @Test mutating func aFailedStart_leavesTheDeviceStopped_untilTheNextWelcome() {
        var failing = DeviceState()
        _ = failing.handle(.captureWanted, at: clock.now)
        #expect(failing.handle(.sourceFailedToStart, at: clock.now).isEmpty)
        #expect(!failing.isCapturing)
        #expect(failing.handle(.captureWanted, at: clock.now) == [.startSource])
    }

    @Test mutating func shutdownPressure_suspendsAndReports_thenResumesSayingWhy() {
        let since = clock.now - 500
        let cause = Interruption(reason: .pressureShutdown, message: "the host reached shutdown pressure", sinceUnixMilliseconds: since)
        _ = frame()
        #expect(step(.suspended(cause)) == [.realFrames(flowing: false), .notify(.interrupted(cause, atUnixMilliseconds: since)), .stopSource])
        #expect(device.interruption == cause && frame().pixels == .discarded)
        _ = step(.sourceStopped)
        clock.advance(milliseconds: 4_000)
        #expect(step(.suspensionLifted(reason: "pressure eased to fair")) == [.startSource])
        #expect(step(.sourceStarted) == [.notify(.resumed("pressure eased to fair", atUnixMilliseconds: clock.now))])
        #expect(device.isStreaming && device.interruption == nil)
    }

    @Test mutating func aSuspensionBeforeTheFirstStart_isNotReported_andTheWelcomeStartsTheDeviceAfterIt() {
        var fresh = DeviceState()
        let cause = Interruption(reason: .pressureShutdown, message: "too hot", sinceUnixMilliseconds: clock.now)
        #expect(fresh.handle(.suspended(cause), at: clock.now).isEmpty, "nobody has heard of the device yet")
        #expect(fresh.handle(.captureWanted, at: clock.now).isEmpty, "held suspended")
        #expect(fresh.handle(.suspensionLifted(reason: "eased"), at: clock.now) == [.startSource])
    }

    @Test mutating func aDeviceInterruption_stopsRealFramesAndIsReportedAtTheClocksTime_andItsEndToo() {
        _ = frame()
        let unplugged = Interruption(reason: .deviceDisconnected, message: "unplugged", sinceUnixMilliseconds: 1)
        #expect(
            step(.deviceInterrupted(unplugged)) == [.realFrames(flowing: false), .notify(.interrupted(unplugged, atUnixMilliseconds: clock.now))])
        #expect(!device.isStreaming && device.isCapturing && !device.realFramesLeaving)
        clock.advance(milliseconds: 1_200)
        #expect(step(.deviceResumed) == [.notify(.resumed("capture resumed by itself", atUnixMilliseconds: clock.now))])
        #expect(frame().actions == [.realFrames(flowing: true)])
        #expect(device.realFramesLeaving)
    }
}
