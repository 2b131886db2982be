import FleetCore
import Foundation
import Testing

/// The zoom recommended for reading a code of a given size at the lens's minimum focus distance.
struct ScanSetupTests {
    static func format(width: Int = 640, fov: Double? = 78, maxZoom: Double = 8) -> VideoFormat {
        VideoFormat(
            pixelFormat: .yuyv, width: width, height: width * 3 / 4, frameRateRanges: [FrameRateRange(min: 1, max: 30)],
            fieldOfViewDegrees: fov, maxZoomFactor: maxZoom)
    }

    static let nearFocus = FocusCapabilities(modes: [.locked], lensPosition: true, minimumFocusDistanceMillimetres: 100)

    @Test func aSmallCode_needsTheZoomThatMakesItFillItsShareAtTheMinimumFocusDistance() throws {
        let setup = try ScanSetup(
            deviceID: "cam", codeMillimetres: 20, fill: nil, activeFormat: Self.format(), focus: Self.nearFocus,
            optics: DeviceOptics(), detectionRegion: nil)
        // 20 mm filling a quarter: an 80 mm wide view, which a 78° lens has at 80 / (2 tan 39°) = 49.4 mm.
        #expect(abs(setup.distanceAtZoomOneMillimetres - 80 / (2 * tan(39 * Double.pi / 180))) < 1e-9)
        #expect(abs(setup.zoomFactor - 100 / setup.distanceAtZoomOneMillimetres) < 1e-9)
        #expect(abs(setup.zoomFactor - 2.0245) < 0.001)
        #expect(setup.workingDistanceMillimetres == 100)
        #expect(abs(setup.achievedFill - 0.25) < 1e-9 && abs(setup.codePixels - 160) < 1e-6 && setup.isReadable)
        #expect(setup.fillSource == .defaultShare && setup.fieldOfViewSource == .format && setup.minimumFocusSource == .focusRange)
        #expect(!setup.isLimitedByMaxZoom)
    }

    @Test func aLargeCode_needsNoZoom_andIsHeldFartherThanTheLensFocuses() throws {
        let setup = try ScanSetup(
            deviceID: "cam", codeMillimetres: 80, fill: 0.25, activeFormat: Self.format(), focus: Self.nearFocus,
            optics: DeviceOptics(), detectionRegion: nil)
        #expect(setup.zoomFactor == 1 && setup.neededZoomFactor == 1)
        #expect(setup.workingDistanceMillimetres > 100 && setup.workingDistanceMillimetres == setup.distanceAtZoomOneMillimetres)
        #expect(abs(setup.achievedFill - 0.25) < 1e-9 && setup.fillSource == .given)
    }

    @Test func theFormatsZoomLimit_capsTheZoom_andTheCodeFillsLess() throws {
        let setup = try ScanSetup(
            deviceID: "cam", codeMillimetres: 5, fill: 0.5, activeFormat: Self.format(width: 320, maxZoom: 4),
            focus: Self.nearFocus, optics: DeviceOptics(), detectionRegion: nil)
        #expect(setup.neededZoomFactor > 4 && setup.zoomFactor == 4 && setup.isLimitedByMaxZoom)
        #expect(abs(setup.achievedFill - 0.5 * 4 / setup.neededZoomFactor) < 1e-9)
        #expect(abs(setup.codePixels - setup.achievedFill * 320) < 1e-9)
    }

    @Test func whatAnOperatorRecorded_standsInForWhatTheDriverDoesNotSay_andWinsOverTheFocusRange() throws {
        let optics = DeviceOptics(fieldOfViewDegrees: 60, minimumFocusDistanceMillimetres: 300)
        let setup = try ScanSetup(
            deviceID: "cam", codeMillimetres: 20, fill: 0.25, activeFormat: Self.format(fov: nil), focus: Self.nearFocus,
            optics: optics, detectionRegion: nil)
        #expect(setup.fieldOfViewSource == .optics && setup.fieldOfViewDegrees == 60)
        #expect(setup.minimumFocusSource == .optics && setup.minimumFocusMillimetres == 300)
        // The format's own field of view wins over the recorded one.
        let own = try ScanSetup(
            deviceID: "cam", codeMillimetres: 20, fill: 0.25, activeFormat: Self.format(fov: 78), focus: .none,
            optics: optics, detectionRegion: nil)
        #expect(own.fieldOfViewSource == .format && own.fieldOfViewDegrees == 78 && own.minimumFocusSource == .optics)
    }

    @Test func aDetectionRegion_isTheShareTheCodeFills_unlessOneIsGiven() throws {
        let region = NormalizedRect(x: 0.3, y: 0.3, width: 0.4, height: 0.4)
        let fromRegion = try ScanSetup(
            deviceID: "cam", codeMillimetres: 20, fill: nil, activeFormat: Self.format(), focus: Self.nearFocus,
            optics: DeviceOptics(), detectionRegion: region)
        #expect(fromRegion.fill == 0.4 && fromRegion.fillSource == .regionOfInterest)
        let whole = try ScanSetup(
            deviceID: "cam", codeMillimetres: 20, fill: nil, activeFormat: Self.format(), focus: Self.nearFocus,
            optics: DeviceOptics(), detectionRegion: .whole)
        #expect(whole.fill == ScanSetup.defaultFill && whole.fillSource == .defaultShare)
    }

    @Test func whatIsMissing_isNamedWithTheCommandThatRecordsIt() {
        #expect(throws: ScanSetup.Failure.unknownFieldOfView(deviceID: "cam")) {
            _ = try ScanSetup(
                deviceID: "cam", codeMillimetres: 20, fill: nil, activeFormat: Self.format(fov: nil), focus: Self.nearFocus,
                optics: DeviceOptics(), detectionRegion: nil)
        }
        #expect(throws: ScanSetup.Failure.unknownMinimumFocusDistance(deviceID: "cam")) {
            _ = try ScanSetup(
                deviceID: "cam", codeMillimetres: 20, fill: nil, activeFormat: Self.format(), focus: .none,
                optics: DeviceOptics(), detectionRegion: nil)
        }
        #expect(ScanSetup.Failure.unknownMinimumFocusDistance(deviceID: "cam").description.contains("capfleet optics cam --min-focus-mm"))
        #expect(throws: ScanSetup.Failure.badCodeSize(0)) {
            _ = try ScanSetup(
                deviceID: "cam", codeMillimetres: 0, fill: nil, activeFormat: Self.format(), focus: Self.nearFocus,
                optics: DeviceOptics(), detectionRegion: nil)
        }
        #expect(throws: ScanSetup.Failure.badFill(1.5)) {
            _ = try ScanSetup(
                deviceID: "cam", codeMillimetres: 20, fill: 1.5, activeFormat: Self.format(), focus: Self.nearFocus,
                optics: DeviceOptics(), detectionRegion: nil)
        }
        #expect(DeviceOptics(fieldOfViewDegrees: 200).problem != nil && DeviceOptics(minimumFocusDistanceMillimetres: -1).problem != nil)
    }
}
