import Testing

@testable import FleetCore

/// The still director's decisions, at fleet times the test chooses.
@Suite struct StillBookTests {
    let now: UInt64 = 1_800_000_000_000_000_000
    let second: UInt64 = 1_000_000_000

    @Test func aStillWithoutAnInstant_isOneSecondFromNow_andOneGivenMustLieWithinTheNextMinute() {
        let cameras = StillBook.Request(deviceIDs: ["cam-1"])
        #expect(StillBook.instant(of: cameras, now: now) == .success(now + second))
        var soon = cameras
        soon.fromNowNs = 5 * second
        #expect(StillBook.instant(of: soon, now: now) == .success(now + 5 * second))
        var edge = cameras
        edge.atFleetTimeNs = now + 60 * second
        #expect(StillBook.instant(of: edge, now: now) == .success(now + 60 * second))
        var far = cameras
        far.atFleetTimeNs = now + 60 * second + 1
        #expect(
            StillBook.instant(of: far, now: now)
                == .failure(.init(.badRequest, "the still's instant must lie within the next 60 s of fleet time (now \(now))")))
        var past = cameras
        past.atFleetTimeNs = now - 1
        #expect(
            StillBook.instant(of: past, now: now)
                == .failure(
                    .init(
                        .badRequest,
                        "the still's instant is 0 ms in the past (now \(now)): only a still from the streams (--size streaming, no bracket) reaches back, into the cameras' pre-roll"
                    )))
    }

    /// A still from the streams reaches back into what the cameras' agents kept: a moment's
    /// still at the frame a rule saw (recordings.md, "Moments by rule").
    @Test func aStillFromTheStreams_mayLieInThePast_withinTheLongestPreRoll_withoutABracket() {
        var streams = StillBook.Request(deviceIDs: ["cam-1"], atFleetTimeNs: now - 2 * second, streamingFormat: true)
        #expect(StillBook.instant(of: streams, now: now) == .success(now - 2 * second))
        streams.atFleetTimeNs = now - 60 * second
        #expect(StillBook.instant(of: streams, now: now) == .success(now - 60 * second))
        streams.atFleetTimeNs = now - 61 * second
        #expect(
            StillBook.instant(of: streams, now: now)
                == .failure(.init(.badRequest, "the still's instant is 61 s in the past, beyond the 60 s a pre-roll keeps")))
        streams.atFleetTimeNs = now - second
        streams.bracketEV = [-1, 0, 1]
        #expect(StillBook.instant(of: streams, now: now).isFailure, "a bracket's exposures are set ahead: it cannot be in the past")
    }

    @Test func aStill_namesItsCamerasOrAll_aWholeSize_andABracketOfAtMostSixteenSteps() {
        #expect(StillBook.instant(of: .init(), now: now) == .failure(.init(.badRequest, "name the cameras, or ask for --all")))
        #expect(
            StillBook.instant(of: .init(all: true, deviceIDs: ["cam-1"]), now: now)
                == .failure(.init(.badRequest, "give either --all or devices, not both")))
        #expect(
            StillBook.instant(of: .init(all: true, width: 640), now: now)
                == .failure(.init(.badRequest, "give the size as WxH, or max for each camera's largest format")))
        let bracket = StillBook.Refusal(.badRequest, "a bracket has at most 16 steps, each between -10 and +10 EV")
        #expect(StillBook.instant(of: .init(all: true, bracketEV: Array(repeating: 0, count: 17)), now: now) == .failure(bracket))
        #expect(StillBook.instant(of: .init(all: true, bracketEV: [-11]), now: now) == .failure(bracket))
        #expect(StillBook.instant(of: .init(all: true, bracketEV: [.nan]), now: now) == .failure(bracket))
        #expect(StillBook.instant(of: .init(all: true, width: 640, height: 480, bracketEV: [-2, 0, 2]), now: now) == .success(now + second))
    }

    @Test func camerasWithoutConsentOrOffline_areRefused_theRestGoOn() {
        let screened = StillBook.screen([
            .init(deviceID: "cam-1", nodeID: "n1", consent: .authorized, online: true),
            .init(deviceID: "cam-2", nodeID: "n1", consent: .denied, online: true),
            .init(deviceID: "cam-3", nodeID: "n2", consent: .authorized, online: false),
        ])
        #expect(screened.refusal == nil)
        #expect(screened.refused["cam-1"] == nil)
        #expect(screened.refused["cam-2"] == "consent is denied: its pictures do not leave its host (capfleet consent grant cam-2)")
        #expect(screened.refused["cam-3"] == "its node n2 is offline")
        #expect(screened.reasons.hasPrefix("cam-2: consent is denied"))
    }

    @Test func whenEveryCameraIsRefused_theStillIs_forConsentOnlyIfThatIsEveryReason() {
        let unconsented = StillBook.screen([.init(deviceID: "cam-1", nodeID: "n1", consent: .notDetermined, online: true)])
        #expect(unconsented.refusal?.kind == .permissionDenied)
        #expect(unconsented.refusal?.description == "no still taken: " + unconsented.reasons)
        let mixed = StillBook.screen([
            .init(deviceID: "cam-1", nodeID: "n1", consent: .denied, online: true),
            .init(deviceID: "cam-2", nodeID: "n2", consent: .authorized, online: false),
        ])
        #expect(mixed.refusal?.kind == .unavailable)
        #expect(mixed.refusal?.description.hasSuffix("cam-2: its node n2 is offline") == true)
    }

    @Test func answers_areWaitedForUntilTheLastPicture_andThirtySecondsPlusTwentyAPicture() {
        #expect(StillBook.answerWaitNanoseconds(untilLast: second, pictures: 1) == 51 * second)
        #expect(StillBook.answerWaitNanoseconds(untilLast: 2 * second, pictures: 3) == 92 * second)
    }

    @Test func aCopy_startsOncePerStill_andAStillBeingCopiedMayNotBeDeleted() {
        var book = StillBook()
        let first = book.startCollecting("s-1")
        let second = book.startCollecting("s-1")
        #expect(first)
        #expect(!second, "a copy of s-1 runs already")
        #expect(book.isCollecting("s-1"))
        #expect(
            book.deletion(of: "s-1", known: true)
                == .init(.unavailable, "still s-1's pictures are being copied; delete it once that is done (capfleet stills show s-1)"))
        #expect(book.deletion(of: "s-9", known: false) == .init(.notFound, "no still s-9; see capfleet stills list"))
        book.finishedCollecting("s-1")
        #expect(!book.isCollecting("s-1"))
        #expect(book.deletion(of: "s-1", known: true) == nil)
        let later = book.startCollecting("s-1")
        #expect(later, "a later copy may run once the first is done")
    }

    @Test func lateHeldPictures_needTheirSidecarsWritten_onlyWhenNothingIndexedThem() {
        #expect(StillBook.heldPicturesNeedSidecars(alreadyIndexed: false, answering: false, pictures: 2))
        #expect(!StillBook.heldPicturesNeedSidecars(alreadyIndexed: true, answering: false, pictures: 2))
        #expect(!StillBook.heldPicturesNeedSidecars(alreadyIndexed: false, answering: true, pictures: 2))
        #expect(!StillBook.heldPicturesNeedSidecars(alreadyIndexed: false, answering: false, pictures: 0))
    }
}

extension Result {
    fileprivate var isFailure: Bool {
        if case .failure = self { true } else { false }
    }
}
