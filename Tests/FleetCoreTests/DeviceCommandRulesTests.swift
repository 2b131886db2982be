import Testing

@testable import FleetCore

/// The device-command rules the coordinator and both camera kinds check.
@Suite struct DeviceCommandRulesTests {
    @Test func zoom_fitsFromOneToTheMaximum_withRoundingRoomOnlyAtTheTop() {
        #expect(DeviceCommandRules.zoomFits(1, maximum: 4))
        #expect(DeviceCommandRules.zoomFits(4, maximum: 4))
        #expect(DeviceCommandRules.zoomFits(4 + 1e-12, maximum: 4), "a factor computed a hair above the top is the top")
        #expect(!DeviceCommandRules.zoomFits(4.001, maximum: 4))
        #expect(!DeviceCommandRules.zoomFits(0.999, maximum: 4))
        #expect(!DeviceCommandRules.zoomFits(.nan, maximum: 4))
        #expect(!DeviceCommandRules.zoomFits(2, maximum: 1), "a format without zoom takes only 1x")
    }

    @Test func aRamp_runsFromAJumpToSixteenPowersOfTwoASecond() {
        #expect(DeviceCommandRules.rampRateFits(0))
        #expect(DeviceCommandRules.rampRateFits(16))
        #expect(!DeviceCommandRules.rampRateFits(16.5))
        #expect(!DeviceCommandRules.rampRateFits(-1))
        #expect(!DeviceCommandRules.rampRateFits(.nan))
    }

    @Test func aFrameRateRange_fitsWhereTheFormatRunsBothEnds_andNamesTheFirstEndItDoesNot() {
        let format = VideoFormat(pixelFormat: .yuyv, width: 64, height: 48, frameRateRanges: [.init(min: 5, max: 15), .init(min: 30, max: 30)])
        #expect(DeviceCommandRules.frameRateFit(minimum: 5, maximum: 15, in: format) == .fits)
        #expect(DeviceCommandRules.frameRateFit(minimum: 30, maximum: 30, in: format) == .fits)
        #expect(DeviceCommandRules.frameRateFit(minimum: 20, maximum: 30, in: format) == .outside(20))
        #expect(DeviceCommandRules.frameRateFit(minimum: 5, maximum: 60, in: format) == .outside(60))
        #expect(DeviceCommandRules.frameRateFit(minimum: 15, maximum: 5, in: format) == .inverted(minimum: 15, maximum: 5))
        #expect(DeviceCommandRules.frameRateFit(minimum: 0, maximum: 5, in: format) == .inverted(minimum: 0, maximum: 5))
    }

    @Test func aFormatIndex_fitsOnlyAmongTheDevicesFormats() {
        let formats = [VideoFormat(pixelFormat: .yuyv, width: 64, height: 48, frameRateRanges: [.init(min: 1, max: 30)])]
        #expect(DeviceCommandRules.formatFits(0, of: formats))
        #expect(!DeviceCommandRules.formatFits(1, of: formats))
        #expect(!DeviceCommandRules.formatFits(-1, of: formats))
    }
}
