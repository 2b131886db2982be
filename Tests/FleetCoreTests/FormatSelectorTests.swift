import FleetCore
import Testing

@Suite struct FormatSelectorTests {
    static func format(_ w: Int, _ h: Int, _ pixel: PixelFormat, _ maxFPS: Double, binned: Bool = false) -> VideoFormat {
        VideoFormat(
            pixelFormat: pixel, width: w, height: h, frameRateRanges: [FrameRateRange(min: binned ? maxFPS : 1, max: maxFPS)], isBinned: binned)
    }

    let formats = [
        format(640, 480, .yuyv, 60), format(640, 480, .nv12, 60),
        format(1280, 720, .yuyv, 30), format(1280, 720, .nv12, 60),
        format(1920, 1080, .yuyv, 30), format(1920, 1080, .nv12, 60), format(1920, 1080, .nv12, 120, binned: true),
        format(3840, 2160, .yuyv, 15), format(3840, 2160, .nv12, 30),
    ]

    func pick(_ request: FormatRequest) -> VideoFormat? {
        try? FormatSelector.select(request, from: formats).map { formats[$0] }.get()
    }

    @Test func presets_pickWhatCameraEngineersExpect() {
        #expect(pick(.preset(.high))?.label == "3840x2160 NV12 1-30fps")
        #expect(pick(.preset(.medium))?.label == "1280x720 NV12 1-60fps")
        #expect(pick(.preset(.low))?.label == "640x480 NV12 1-60fps")
        #expect(pick(.preset(.photo))?.label == "3840x2160 NV12 1-30fps")
        #expect(pick(.preset(.hd1080))?.label == "1920x1080 NV12 1-60fps")
        #expect(pick(.preset(.hd720))?.label == "1280x720 NV12 1-60fps")
    }

    @Test func bestMatch_honoursPixelFormatAndFrameRate() {
        #expect(pick(.bestMatch(width: 1920, height: 1080, pixelFormat: .yuyv, framesPerSecond: nil))?.label == "1920x1080 YUYV 1-30fps")
        #expect(pick(.bestMatch(width: 1920, height: 1080, pixelFormat: nil, framesPerSecond: 60))?.label == "1920x1080 NV12 1-60fps")
        #expect(pick(.bestMatch(width: 1920, height: 1080, pixelFormat: nil, framesPerSecond: 120))?.label == "1920x1080 NV12 120fps binned")
        #expect(pick(.bestMatch(width: 3840, height: 2160, pixelFormat: nil, framesPerSecond: 30))?.label == "3840x2160 NV12 1-30fps")
        #expect(pick(.bestMatch(width: nil, height: nil, pixelFormat: .yuyv, framesPerSecond: 60))?.label == "640x480 YUYV 1-60fps")
    }

    @Test func aSizeNoFormatHas_isRefusedListingTheSizesThereAre() throws {
        let refusal = try #require(failure(.bestMatch(width: 99999, height: 1, pixelFormat: nil, framesPerSecond: nil)))
        #expect(refusal.description.contains("cannot do 99999x1"))
        #expect(refusal.description.contains("its sizes: 640x480 (YUYV 1-60fps, NV12 1-60fps); 1280x720"))
        #expect(refusal.description.contains("3840x2160 (YUYV 1-15fps, NV12 1-30fps)"))
        #expect(pick(.bestMatch(width: 1900, height: 1000, pixelFormat: nil, framesPerSecond: 60)) == nil, "the nearest size is another picture")
    }

    @Test func aRateOutsideEveryMatchingFormat_isRefusedNamingTheirRanges() throws {
        let refusal = try #require(failure(.bestMatch(width: 3840, height: 2160, pixelFormat: .yuyv, framesPerSecond: 30)))
        #expect(
            refusal.description
                == "the device cannot do 3840x2160 YUYV at 30 fps; its frame rate ranges there: 3840x2160 YUYV 1-15fps. See capfleet formats DEVICE",
            "4K YUYV runs up to 15 fps: refused, not another size and not 15 fps")
        let wrongPixel = try #require(failure(.bestMatch(width: 1280, height: 720, pixelFormat: .mjpeg, framesPerSecond: nil)))
        #expect(wrongPixel.description.contains("its formats at that size: 1280x720 YUYV 1-30fps; 1280x720 NV12 1-60fps"))
    }

    @Test func aNewFormat_keepsTheRateItRuns_elseTakesItsDefault() {
        let slow = Self.format(3840, 2160, .yuyv, 15), fast = Self.format(1280, 720, .nv12, 60)
        #expect(FormatSelector.frameRate(keeping: FrameRateRange(min: 60, max: 60), on: slow) == FrameRateRange(min: 15, max: 15))
        #expect(FormatSelector.frameRate(keeping: FrameRateRange(min: 10, max: 15), on: fast) == FrameRateRange(min: 10, max: 15))
        #expect(
            FormatSelector.frameRate(keeping: FrameRateRange(min: 10, max: 60), on: slow) == FrameRateRange(min: 10, max: 15),
            "the slowest rate stays where the new format runs it and is not above the rate")
        #expect(
            FormatSelector.frameRate(keeping: FrameRateRange(min: 120, max: 120), on: fast) == FrameRateRange(min: 30, max: 30),
            "the default is the highest rate up to 30 fps")
    }

    func failure(_ request: FormatRequest) -> FormatRefusal? {
        if case let .failure(refusal) = FormatSelector.select(request, from: formats) { return refusal }
        return nil
    }

    @Test func impossibleRequests_areRefusedWithTheSupportedList() {
        switch FormatSelector.select(.bestMatch(width: nil, height: nil, pixelFormat: .mjpeg, framesPerSecond: nil), from: formats) {
        case .success: Issue.record("there is no MJPG format")
        case let .failure(refusal):
            #expect(refusal.supported.count == formats.count)
            #expect(refusal.description.contains("MJPG") && refusal.description.contains("3840x2160 NV12 1-30fps"))
        }
        #expect(pick(.index(42)) == nil)
        let small = [Self.format(640, 480, .yuyv, 30)]
        #expect((try? FormatSelector.select(.preset(.uhd2160), from: small).get()) == nil)
    }
}
