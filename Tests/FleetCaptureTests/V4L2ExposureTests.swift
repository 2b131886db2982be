import CV4L2
import FleetCore
import Testing

@testable import FleetCapture

/// The choices V4L2 exposure makes from a device's controls, on controls as UVC webcams and
/// vivid report them (no device needed).
@Suite struct V4L2ExposureTests {
    /// EXPOSURE_ABSOLUTE as a C920 reports it: 3 to 2047 units of 100 µs.
    static func absolute(minimum: Int64 = 3, maximum: Int64 = 2047, step: UInt64 = 1, readOnly: Bool = false) -> DeviceControl {
        DeviceControl(
            id: CAPFLEET_V4L2_CID_EXPOSURE_ABSOLUTE, name: "Exposure Time, Absolute", kind: .integer, minimum: minimum,
            maximum: maximum, step: step, defaultValue: 250, value: 250, isReadOnly: readOnly)
    }

    /// EXPOSURE_AUTO with the given menu items (value: name).
    static func mode(default defaultValue: Int64, items: [Int64: String]) -> DeviceControl {
        DeviceControl(
            id: CAPFLEET_V4L2_CID_EXPOSURE_AUTO, name: "Auto Exposure", kind: .menu, minimum: 0, maximum: 3, step: 1,
            defaultValue: defaultValue, value: defaultValue,
            menu: items.sorted { $0.key < $1.key }.map { DeviceControl.MenuItem(index: UInt32($0.key), name: $0.value, value: $0.key) })
    }

    static let uvcMenu: [Int64: String] = [1: "Manual Mode", 3: "Aperture Priority Mode"]

    @Test func shimConstants_matchTheKernelHeaders() {
        #expect(CAPFLEET_V4L2_CID_EXPOSURE_AUTO == 0x009a_0901 && CAPFLEET_V4L2_CID_EXPOSURE_ABSOLUTE == 0x009a_0902)
        #expect(CAPFLEET_V4L2_EXPOSURE_AUTO == 0 && CAPFLEET_V4L2_EXPOSURE_MANUAL == 1)
        #expect(CAPFLEET_V4L2_EXPOSURE_SHUTTER_PRIORITY == 2 && CAPFLEET_V4L2_EXPOSURE_APERTURE_PRIORITY == 3)
    }

    @Test func aDeviceWithoutAnExposureTime_hasNoExposureControl() {
        #expect(V4L2Exposure(controls: [Self.mode(default: 3, items: Self.uvcMenu)]) == nil, "auto modes alone set no time")
        #expect(V4L2Exposure(controls: [Self.absolute(readOnly: true)]) == nil)
        #expect(V4L2Exposure(controls: []) == nil)
    }

    @Test func theRange_isTheControlsRangeIn100MicrosecondUnits() throws {
        let exposure = try #require(V4L2Exposure(controls: [Self.absolute()]))
        #expect(abs(exposure.minimumSeconds - 300e-6) < 1e-12 && abs(exposure.maximumSeconds - 0.2047) < 1e-12)
        #expect(exposure.controlValue(forSeconds: 0.040) == 400)
        #expect(exposure.controlValue(forSeconds: 0.000_34) == 3, "the nearest unit the control takes")
        #expect(exposure.controlValue(forSeconds: 0.2047) == 2047)
        let stepped = try #require(V4L2Exposure(controls: [Self.absolute(minimum: 5, maximum: 1000, step: 10)]))
        #expect(stepped.controlValue(forSeconds: 0.0123) == 125, "on the control's step from its minimum: 5, 15, ... 125")
        #expect(stepped.controlValue(forSeconds: 0.1) == 995, "the last step within the range")
    }

    @Test func automatic_isTheDefaultMode_elseAperturePriority_elseAuto() {
        // A UVC webcam: default aperture priority.
        #expect(V4L2Exposure.automaticMode(of: Self.mode(default: 3, items: Self.uvcMenu)) == 3)
        // Shipped in manual: aperture priority if the menu has it, else full auto.
        #expect(V4L2Exposure.automaticMode(of: Self.mode(default: 1, items: Self.uvcMenu)) == 3)
        #expect(V4L2Exposure.automaticMode(of: Self.mode(default: 1, items: [0: "Auto Mode", 1: "Manual Mode"])) == 0)
        // A default of shutter priority is the camera's own idea of auto.
        #expect(
            V4L2Exposure.automaticMode(of: Self.mode(default: 2, items: [1: "Manual Mode", 2: "Shutter Priority Mode", 3: "Aperture Priority Mode"]))
                == 2)
        #expect(V4L2Exposure.automaticMode(of: Self.mode(default: 1, items: [1: "Manual Mode"])) == nil)
    }

    @Test func requestsTheDeviceCannotDo_areRefusedWithWhatItOffers() throws {
        let uvc = try #require(V4L2Exposure(controls: [Self.absolute(), Self.mode(default: 3, items: Self.uvcMenu)]))
        #expect(uvc.refusal(of: .automatic) == nil && uvc.refusal(of: .manual(seconds: 0.040)) == nil)
        let long = try #require(uvc.refusal(of: .manual(seconds: 0.5)))
        #expect(long.contains("300 µs to 204.7 ms"), "\(long)")

        let manualOnly = try #require(V4L2Exposure(controls: [Self.absolute()]))
        #expect(manualOnly.refusal(of: .automatic)?.contains("manually only") == true)
        #expect(manualOnly.refusal(of: .manual(seconds: 0.010)) == nil)

        let noAuto = try #require(V4L2Exposure(controls: [Self.absolute(), Self.mode(default: 1, items: [1: "Manual Mode"])]))
        #expect(noAuto.refusal(of: .automatic)?.contains("offers: Manual Mode") == true)
        let autoOnly = try #require(V4L2Exposure(controls: [Self.absolute(), Self.mode(default: 3, items: [3: "Aperture Priority Mode"])]))
        #expect(autoOnly.refusal(of: .manual(seconds: 0.010))?.contains("no manual mode") == true)
    }
}
