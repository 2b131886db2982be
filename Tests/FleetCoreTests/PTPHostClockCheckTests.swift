import FleetCore
import Testing

/// Whether a PTP camera's clock and the host's keep the same time, judged from when its
/// frames arrive against their stamps.
@Suite struct PTPHostClockCheckTests {
    let offsets = PTPHostClockCheck.timescaleOffsets(kernelTAIOffsetSeconds: 0)
    /// A realistic run: 10 fps for `seconds`, each frame arriving 3 ms plus up to 2 ms of
    /// jitter after its exposure, the camera's clock `cameraAhead` ns ahead of the host's.
    func fed(seconds: Int, cameraAhead: Int64, start: UInt64 = 1_700_000_000_000_000_000) -> PTPHostClockCheck {
        var check = PTPHostClockCheck()
        var jitter: UInt64 = 12345
        for frame in 0..<(seconds * 10) {
            let exposure = start + UInt64(frame) * 100_000_000
            jitter = (jitter &* 6_364_136_223_846_793_005 &+ 1) >> 11
            check.add(cameraNs: UInt64(Int64(exposure) + cameraAhead), arrivalRealtimeNs: exposure + 3_000_000 + jitter % 2_000_000)
        }
        return check
    }

    @Test func aHostOnTheCamerasTimescale_agrees_withTheShortestDelayAsTheResidual() {
        let verdict = fed(seconds: 5, cameraAhead: 0).verdict(offsets: offsets)
        guard case let .agrees(offset, residual) = verdict else {
            Issue.record("\(verdict)")
            return
        }
        #expect(offset == 0)
        #expect(residual >= 3_000_000 && residual < 3_100_000, "the shortest of the delays: \(residual)")
    }

    @Test func aCameraOnTAI_andAHostOnUTC_agreeAt37Seconds() {
        #expect(offsets == [0, 37_000_000_000])
        let verdict = fed(seconds: 5, cameraAhead: 37_000_000_000).verdict(offsets: offsets)
        guard case let .agrees(offset, residual) = verdict else {
            Issue.record("\(verdict)")
            return
        }
        #expect(offset == 37_000_000_000 && residual >= 3_000_000 && residual < 3_100_000)
        // The kernel's own TAI offset is tried too, when it is set to something else.
        #expect(PTPHostClockCheck.timescaleOffsets(kernelTAIOffsetSeconds: 36) == [0, 37_000_000_000, 36_000_000_000])
    }

    @Test func aHostClockBehindTheCamerasTime_orFarOff_disagrees() {
        // 5 ms behind: frames would arrive 2 ms before their exposure.
        let behind = fed(seconds: 5, cameraAhead: 5_000_000).verdict(offsets: offsets)
        guard case let .disagrees(shortest) = behind, shortest <= -1_000_000, shortest > -2_000_000 else {
            Issue.record("\(behind)")
            return
        }
        // Three seconds off (a host clock never set): no timescale explains it.
        if case .agrees = fed(seconds: 5, cameraAhead: -3_000_000_000).verdict(offsets: offsets) { Issue.record("3 s off cannot agree") }
        // 100 µs behind is within what a disciplined host's clock and the stamps allow.
        if case .disagrees = fed(seconds: 5, cameraAhead: 3_100_000).verdict(offsets: offsets) { Issue.record("100 µs early must agree") }
    }

    @Test func underTwoSecondsOfFrames_itCannotTell_andAResetForgets() {
        #expect(fed(seconds: 1, cameraAhead: 0).verdict(offsets: offsets) == .unknown)
        var check = fed(seconds: 5, cameraAhead: 0)
        check.reset()
        #expect(check.verdict(offsets: offsets) == .unknown)
    }

    @Test func onlyTheWindowsSecondsCount() {
        // A clock that disagreed 20 s ago and agrees now: the window is the last 10 s.
        var check = fed(seconds: 5, cameraAhead: 50_000_000, start: 1_700_000_000_000_000_000)
        var jitter: UInt64 = 1
        for frame in 0..<120 {
            let exposure: UInt64 = 1_700_000_020_000_000_000 + UInt64(frame) * 100_000_000
            jitter = (jitter &* 6_364_136_223_846_793_005 &+ 1) >> 11
            check.add(cameraNs: exposure, arrivalRealtimeNs: exposure + 3_000_000 + jitter % 2_000_000)
        }
        if case .agrees = check.verdict(offsets: offsets) {} else { Issue.record("\(check.verdict(offsets: offsets))") }
    }
}
