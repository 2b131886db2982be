import FleetCore
import Testing

/// How an operator names a control and its value, and what a control refuses (commands.md, "Controls").
@Suite struct DeviceControlTests {
    let gain = DeviceControl(id: 0x0098_0913, name: "Gain (0.01 dB)", kind: .integer, minimum: 0, maximum: 2400, step: 10, defaultValue: 0, value: 0)
    let automatic = DeviceControl(
        id: 0x0098_0912, name: "Gain, Automatic", kind: .menu, minimum: 0, maximum: 2, step: 1, defaultValue: 0, value: 0,
        menu: [.init(index: 0, name: "Off", value: 0), .init(index: 2, name: "Continuous", value: 2)])
    let locked = DeviceControl(id: 7, name: "Serial", kind: .integer, minimum: 0, maximum: 9, step: 1, defaultValue: 0, value: 3, isReadOnly: true)

    @Test func aControl_isNamedByItsKey_itsName_orItsId() {
        let controls = [gain, automatic]
        #expect(DeviceControl.named("gain_0_01_db", in: controls)?.id == gain.id)
        #expect(DeviceControl.named("Gain, automatic", in: controls)?.id == automatic.id)
        #expect(DeviceControl.named("0x00980912", in: controls)?.id == automatic.id)
        #expect(DeviceControl.named(String(0x0098_0913), in: controls)?.id == gain.id)
        #expect(DeviceControl.named("brightness", in: controls) == nil)
        #expect(DeviceControl.hexadecimal(0x0098_0913) == "0x00980913")
    }

    @Test func aValue_isANumberOrAMenuItemsName() {
        #expect(automatic.value(parsing: "continuous") == 2)
        #expect(gain.value(parsing: "120") == 120)
        #expect(gain.value(parsing: "loud") == nil)
    }

    @Test func outOfRange_offItsSteps_notAnItem_orReadOnly_isRefused() {
        #expect(gain.refusal(of: 2410) == "2410 is outside Gain (0.01 dB)'s range 0…2400")
        #expect(gain.refusal(of: 15) == "15 is not on Gain (0.01 dB)'s steps of 10 from 0")
        #expect(gain.refusal(of: 120) == nil)
        #expect(automatic.refusal(of: 1) == "1 is not one of Gain, Automatic's items (0=Off, 2=Continuous)")
        #expect(automatic.refusal(of: 2) == nil)
        #expect(locked.refusal(of: 4) == "Serial is read-only")
    }

    @Test func nearest_landsInsideTheRange_onASteps() {
        #expect(gain.nearest(1234) == 1230 && gain.nearest(1236) == 1240, "steps of 10")
        #expect(gain.nearest(-5) == 0 && gain.nearest(9999) == 2400, "inside the range")
        let pan = DeviceControl(
            id: DeviceControl.panAbsoluteID, name: "Pan, Absolute", kind: .integer, minimum: -36000, maximum: 36000, step: 3600, defaultValue: 0,
            value: 0)
        #expect(pan.nearest(5000) == 3600 && pan.nearest(-5500) == -7200)
    }
}
