import Testing

@testable import FleetCore

struct FreeRunStartTests {
    static let period: UInt64 = 40_000_000  // 25 fps

    /// A driver whose frames fall 13.5 ms (mod 40) after each start call, with a few µs of noise.
    static func learnt(offset: UInt64, startedAt start: UInt64 = 5_000_000_000) -> FreeRunStart {
        var learner = FreeRunStart()
        learner.started(atMonotonic: start, period: period)
        for frame in 0..<(FreeRunStart.framesSkipped + FreeRunStart.framesLearnt) {
            let noise = UInt64(frame % 3) * 2_000
            learner.frameCaptured(atMonotonic: start + offset + UInt64(frame) * period + noise)
        }
        return learner
    }

    @Test func aStart_teachesHowFarAfterItsCallTheFramesFall() throws {
        let learner = Self.learnt(offset: 53_500_000)
        #expect(!learner.isLearning)
        let offset = try #require(learner.startOffset)
        #expect(offset.period == Self.period)
        // 53.5 ms is 13.5 ms past a whole interval; the noise averages in at about 2 µs.
        #expect((13_500_000...13_504_000).contains(offset.offset))
    }

    @Test func theNextStart_isTimedSoItsFramesFallOnTheGridsSlots() throws {
        let learner = Self.learnt(offset: 13_500_000)
        let slot: UInt64 = 7_000_000_000 + 7_000_000  // a slot of the grid, 7 ms past a whole second
        let earliest: UInt64 = 9_000_000_000
        let start = try #require(learner.instant(earliest: earliest, slotMonotonic: slot, period: Self.period))
        #expect(start >= earliest && start < earliest + Self.period)
        // Its frames then fall on slots: (start + offset) − slot is a whole number of intervals.
        let firstFrame = start + learner.startOffset!.offset
        #expect((firstFrame - slot) % Self.period <= 3_000 || Self.period - (firstFrame - slot) % Self.period <= 3_000)
    }

    @Test func offsetsEitherSideOfAWholeInterval_averageNearZero_notHalfAnInterval() {
        let offsets: [UInt64] = [39_999_000, 1_000, 39_998_000, 2_000]
        let mean = FreeRunStart.circularMean(offsets, period: Self.period)
        #expect(mean < 1_000 || mean > Self.period - 1_000)
    }

    @Test func withoutAMeasuredStart_orAtAnotherRate_noInstantIsGiven() {
        var learner = FreeRunStart()
        #expect(learner.instant(earliest: 1_000, slotMonotonic: 0, period: Self.period) == nil)
        learner.started(atMonotonic: 1_000, period: Self.period)
        let wantsMore = learner.frameCaptured(atMonotonic: 2_000)
        #expect(wantsMore)
        #expect(learner.instant(earliest: 1_000, slotMonotonic: 0, period: Self.period) == nil, "a start still being learnt")
        let learnt = Self.learnt(offset: 1_000_000)
        #expect(learnt.instant(earliest: 1_000, slotMonotonic: 0, period: 33_333_333) == nil, "learnt at 25 fps, asked at 30")
    }

    @Test func framesFromBeforeTheStart_areNotLearnt() {
        var learner = FreeRunStart()
        learner.started(atMonotonic: 10_000_000_000, period: Self.period)
        // A buffer of the stream before, delivered late.
        let wantsMore = learner.frameCaptured(atMonotonic: 9_990_000_000)
        #expect(wantsMore)
        #expect(learner.isLearning && learner.startOffset == nil)
    }
}

extension FreeRunStartTests {
    @Test func aStreamIsStartedOnTheGrid_onlyWhileItStreams_noTakeRecords_andTheClockIsLocked() {
        #expect(FreeRunStart.refusal(streaming: true, recording: false, clockLocked: true) == nil)
        #expect(FreeRunStart.refusal(streaming: false, recording: false, clockLocked: true)?.contains("not streaming") == true)
        #expect(FreeRunStart.refusal(streaming: true, recording: true, clockLocked: true)?.contains("take") == true)
        #expect(FreeRunStart.refusal(streaming: true, recording: false, clockLocked: false)?.contains("not locked") == true)
    }
}
