import FleetCore
import Testing

/// The agent's side of the recording path: credit bounds what is in flight, frames are kept
/// until stored, a resume sends again what the coordinator does not have, and nothing goes
/// without an answer to a resume.
@Suite struct RecordFlowTests {
    typealias Flow = RecordFlow<UInt64>

    /// Frames 10…19 of 100 bytes each, waiting.
    static func flow(frames: ClosedRange<UInt64> = 10...19, bytes: Int = 100) -> Flow {
        var flow = Flow(resumeInterval: 3_000)
        for sequence in frames { flow.append(sequence: sequence, bytes: bytes, payload: sequence) }
        return flow
    }

    /// Sends everything the flow allows now; returns the sequences sent.
    static func drain(_ flow: inout Flow) -> [UInt64] {
        var sent: [UInt64] = []
        while case let .frame(sequence, _) = flow.nextStep() {
            sent.append(sequence)
            flow.markSent()
        }
        return sent
    }

    @Test func nothingGoes_untilAResumeIsAnswered() {
        var flow = Self.flow()
        #expect(flow.shouldAskToResume(now: 0))
        flow.askedToResume(now: 0)
        #expect(Self.drain(&flow).isEmpty, "no frame without credit")
        #expect(!flow.shouldAskToResume(now: 1_000), "not again before the interval")
        #expect(flow.shouldAskToResume(now: 3_000), "asked again when unanswered")
        _ = flow.apply(RecordCredit(stream: 1, windowFrames: 4, windowBytes: 10_000), now: 3_100)
        #expect(Self.drain(&flow) == [10, 11, 12, 13], "a window of 4 frames")
    }

    @Test func theWindow_boundsFramesAndBytesInFlight_andOneFrameAlwaysMayGo() {
        var flow = Self.flow()
        flow.askedToResume(now: 0)
        _ = flow.apply(RecordCredit(stream: 1, windowFrames: 8, windowBytes: 250), now: 1)
        #expect(Self.drain(&flow) == [10, 11], "250 bytes hold two 100-byte frames")
        _ = flow.apply(RecordCredit(stream: 1, consumedThrough: 10, windowFrames: 8, windowBytes: 250), now: 2)
        #expect(Self.drain(&flow) == [12], "one consumed, one more may go")

        var big = Self.flow(bytes: 1_000)
        big.askedToResume(now: 0)
        _ = big.apply(RecordCredit(stream: 1, windowFrames: 8, windowBytes: 250), now: 1)
        #expect(Self.drain(&big) == [10], "a frame larger than the window goes alone")
    }

    @Test func storedFrames_areReleased_andNothingElse() {
        var flow = Self.flow()
        flow.askedToResume(now: 0)
        _ = flow.apply(RecordCredit(stream: 1, windowFrames: 20, windowBytes: 1 << 20), now: 1)
        _ = Self.drain(&flow)
        let released = flow.apply(RecordCredit(stream: 1, storedThrough: 13, consumedThrough: 15, windowFrames: 20, windowBytes: 1 << 20), now: 2)
        #expect(released == [10, 11, 12, 13])
        #expect(flow.waitingFrames == 6 && flow.waitingBytes == 600)
    }

    @Test func aResume_sendsAgainWhatTheCoordinatorDoesNotHave() {
        var flow = Self.flow()
        flow.askedToResume(now: 0)
        _ = flow.apply(RecordCredit(stream: 1, windowFrames: 20, windowBytes: 1 << 20), now: 1)
        #expect(Self.drain(&flow).count == 10)
        // The connection died with frames in it: the coordinator got 10…14 and stored 10…12.
        _ = flow.apply(RecordCredit(stream: 1, storedThrough: 12, consumedThrough: 14, windowFrames: 20, windowBytes: 1 << 20), now: 2)
        flow.connectionRenewed()
        #expect(flow.shouldAskToResume(now: 3))
        flow.askedToResume(now: 3)
        #expect(Self.drain(&flow).isEmpty)
        let released = flow.apply(RecordCredit(stream: 2, resumeAfter: 14, storedThrough: 12, windowFrames: 20, windowBytes: 1 << 20), now: 4)
        #expect(released.isEmpty)
        #expect(Self.drain(&flow) == [15, 16, 17, 18, 19], "again from after what the coordinator has, in order")
    }

    @Test func staleCredit_fromAnOlderStream_isIgnored() {
        var flow = Self.flow()
        flow.askedToResume(now: 0)
        _ = flow.apply(RecordCredit(stream: 5, windowFrames: 1, windowBytes: 1 << 20), now: 1)
        #expect(Self.drain(&flow) == [10])
        _ = flow.apply(RecordCredit(stream: 4, consumedThrough: 10, windowFrames: 9, windowBytes: 1 << 20), now: 2)
        #expect(Self.drain(&flow).isEmpty, "an older stream's credit changes nothing")
    }

    @Test func aSilentCoordinator_withFramesWaiting_isAskedAgain() {
        var flow = Self.flow()
        flow.askedToResume(now: 0)
        _ = flow.apply(RecordCredit(stream: 1, windowFrames: 20, windowBytes: 1 << 20), now: 10)
        #expect(!flow.shouldAskToResume(now: 3_000))
        #expect(flow.shouldAskToResume(now: 3_010), "frames wait and nothing heard for the interval")
    }

    @Test func theEnd_goesAfterEveryFrame_andDoneReleasesAll() {
        var flow = Self.flow(frames: 1...3)
        flow.queueEnd()
        flow.askedToResume(now: 0)
        _ = flow.apply(RecordCredit(stream: 1, windowFrames: 20, windowBytes: 1 << 20), now: 1)
        #expect(Self.drain(&flow) == [1, 2, 3])
        guard case .end = flow.nextStep() else {
            Issue.record("the end follows the last frame")
            return
        }
        flow.markEndSent()
        guard case .idle = flow.nextStep() else {
            Issue.record("the end goes once")
            return
        }
        #expect(flow.finish() == [1, 2, 3])
        #expect(flow.isDone && flow.waitingFrames == 0 && !flow.shouldAskToResume(now: 1_000_000))
    }

    @Test func consentWithdrawn_keepsUnsentFramesOnTheHost() {
        var flow = Self.flow()
        flow.askedToResume(now: 0)
        _ = flow.apply(RecordCredit(stream: 1, windowFrames: 3, windowBytes: 1 << 20), now: 1)
        #expect(Self.drain(&flow) == [10, 11, 12])
        let withheld = flow.withholdUnsent()
        #expect(withheld == Array(13...19), "what never left stays")
        #expect(flow.endQueued)
        _ = flow.apply(RecordCredit(stream: 1, consumedThrough: 12, windowFrames: 3, windowBytes: 1 << 20), now: 2)
        guard case .end = flow.nextStep() else {
            Issue.record("the part ends after what already went")
            return
        }
    }
}

@Suite struct RetentionPolicyTests {
    static let day: Int64 = 86_400_000
    static let takes: [(id: String, createdAt: Int64, bytes: Int64, recording: Bool)] = [
        ("oldest", 1 * day, 400, false), ("old", 2 * day, 300, false), ("recent", 9 * day, 200, false), ("live", 10 * day, 500, true),
    ]

    @Test func noLimits_deleteNothing() {
        #expect(RetentionPolicy().expired(Self.takes, now: 10 * Self.day).isEmpty)
    }

    @Test func theBudget_deletesOldestFirst_countingTheTakeInProgress() {
        #expect(RetentionPolicy(budgetBytes: 900).expired(Self.takes, now: 10 * Self.day) == ["oldest", "old"])
        #expect(RetentionPolicy(budgetBytes: 1_000).expired(Self.takes, now: 10 * Self.day) == ["oldest"])
        #expect(
            RetentionPolicy(budgetBytes: 100).expired(Self.takes, now: 10 * Self.day) == ["oldest", "old", "recent"],
            "never the take in progress, even over budget")
    }

    @Test func theAgeLimit_neverTouchesATakeInProgress() {
        let policy = RetentionPolicy(maximumAgeSeconds: 5 * 86_400)
        #expect(policy.expired(Self.takes, now: 10 * Self.day) == ["oldest", "old"])
        #expect(policy.expired(Self.takes, now: 30 * Self.day) == ["oldest", "old", "recent"], "the live take stays however old")
    }
}
