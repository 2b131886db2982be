import FleetCore
import Testing

@Suite struct StillPlanTests {
    static let formats: [VideoFormat] = [
        VideoFormat(pixelFormat: .yuyv, width: 640, height: 480, frameRateRanges: [FrameRateRange(min: 1, max: 30)]),
        VideoFormat(pixelFormat: .nv12, width: 1920, height: 1080, frameRateRanges: [FrameRateRange(min: 1, max: 30)]),
        VideoFormat(pixelFormat: .nv12, width: 4000, height: 3000, frameRateRanges: [FrameRateRange(min: 120, max: 120)], isBinned: true),
        VideoFormat(pixelFormat: .yuyv, width: 4000, height: 3000, frameRateRanges: [FrameRateRange(min: 1, max: 5)]),
        VideoFormat(pixelFormat: .nv12, width: 4000, height: 3000, frameRateRanges: [FrameRateRange(min: 1, max: 5)]),
    ]

    @Test func max_choosesTheLargestUnbinnedFormat_inTheStreamingPixelFormat() throws {
        let plan = try StillPlan.plan(formats: Self.formats, activeIndex: 0, request: StillRequest(), deviceID: "cam").get()
        #expect(plan == StillPlan(formatIndex: 3, switchesFormat: true), "YUYV like the 640x480 stream, not the binned one")
        let fromNV12 = try StillPlan.plan(formats: Self.formats, activeIndex: 1, request: StillRequest(), deviceID: "cam").get()
        #expect(fromNV12.formatIndex == 4)
    }

    @Test func theStreamingFormat_isKeptWhenItIsTheSizeAskedFor() throws {
        let plan = try StillPlan.plan(formats: Self.formats, activeIndex: 1, request: StillRequest(width: 1920, height: 1080), deviceID: "cam").get()
        #expect(plan == StillPlan(formatIndex: 1, switchesFormat: false))
    }

    @Test func theStreamingFormatAsked_isTheActiveOne_neverASwitch() throws {
        for active in Self.formats.indices {
            let plan = try StillPlan.plan(formats: Self.formats, activeIndex: active, request: StillRequest(streamingFormat: true), deviceID: "cam")
                .get()
            #expect(plan == StillPlan(formatIndex: active, switchesFormat: false))
        }
    }

    @Test func aPixelFormatAsked_isTaken_orRefusedNamingWhatTheSizeOffers() throws {
        let plan = try StillPlan.plan(formats: Self.formats, activeIndex: 0, request: StillRequest(pixelFormat: .nv12), deviceID: "cam").get()
        #expect(plan.formatIndex == 4)
        let refused = StillPlan.plan(formats: Self.formats, activeIndex: 0, request: StillRequest(pixelFormat: .mjpeg), deviceID: "cam")
        guard case let .failure(refusal) = refused else { Issue.record("MJPG at 4000x3000 does not exist"); return }
        #expect(refusal.description.contains("no MJPG format at 4000x3000") && refusal.description.contains("YUYV, NV12"), "\(refusal)")
    }

    @Test func anUnknownSize_isRefusedListingTheSizes_largestFirst() {
        guard
            case let .failure(refusal) = StillPlan.plan(
                formats: Self.formats, activeIndex: 0, request: StillRequest(width: 800, height: 600), deviceID: "cam")
        else {
            Issue.record("800x600 does not exist")
            return
        }
        #expect(refusal.description.contains("4000x3000, 1920x1080, 640x480"), "\(refusal)")
    }

    @Test func aBracket_putsItsPicturesOneIntervalApart() {
        let request = StillRequest(bracketEV: [-2, 0, 2], bracketIntervalNanoseconds: 250_000_000)
        #expect(request.instants(from: 1_000) == [1_000, 250_001_000, 500_001_000])
        #expect(StillRequest().instants(from: 7) == [7])
    }

    @Test func nearestFrame_isTheOneAfter_whenItIsNearer() {
        var choice = NearestFrameChoice(instant: 1_000_000)
        #expect(choice.frame(at: 900_000, period: 66_000_000) == .hold)
        #expect(choice.frame(at: 1_040_000, period: 66_000_000) == .takeThis, "40 µs after beats 100 µs before")
    }

    @Test func nearestFrame_isTheHeldOne_whenTheNextIsFurther() {
        var choice = NearestFrameChoice(instant: 100_000_000)
        #expect(choice.frame(at: 20_000_000, period: 33_000_000) == .ignore, "more than two intervals early")
        #expect(choice.frame(at: 70_000_000, period: 33_000_000) == .hold)
        #expect(choice.frame(at: 99_000_000, period: 33_000_000) == .hold, "a nearer one replaces it")
        #expect(choice.held == 99_000_000)
        #expect(choice.frame(at: 132_000_000, period: 33_000_000) == .takeHeld)
    }

    @Test func aFrameExactlyAtTheInstant_isTaken() {
        var choice = NearestFrameChoice(instant: 5_000)
        #expect(choice.frame(at: 5_000, period: 1_000) == .takeThis)
    }
}
