import FleetCore
import Testing

@Suite struct ExposureTimecodeTests {
    static let bootID = "5b1f3c2e-9a0d-4e6f-8b7a-0c1d2e3f4a5b"

    @Test func hostMonotonicReadsBackWhatItWrote() {
        let code = ExposureTimecode.hostMonotonic(bootID: Self.bootID, nanoseconds: 123_456_789_012)
        #expect(code.text == "CFTC1 M \(Self.bootID) 123456789012")
        #expect(ExposureTimecode(text: code.text) == code)
    }

    @Test func fleetReadsBackWhatItWrote() {
        let code = ExposureTimecode.fleet(nanoseconds: 1_795_000_000_123_456_789, refreshMillihertz: 59_940)
        #expect(code.text == "CFTC1 F 1795000000123456789 59940")
        #expect(ExposureTimecode(text: code.text) == code)
        #expect(ExposureTimecode(text: "CFTC1 F 0 0") == .fleet(nanoseconds: 0, refreshMillihertz: 0))
    }

    @Test func theLargestNumbersRoundTrip() {
        let code = ExposureTimecode.fleet(nanoseconds: .max, refreshMillihertz: .max)
        #expect(ExposureTimecode(text: code.text) == code)
        #expect(ExposureTimecode(text: "CFTC1 F 18446744073709551616 0") == nil)
        #expect(ExposureTimecode(text: "CFTC1 F 1 4294967296") == nil)
    }

    @Test(arguments: [
        "", "hello", "capfleet-42", "CFTC1", "CFTC1 M", "CFTC2 F 1 0", "cftc1 F 1 0",
        // Spacing, signs, leading zeros and stray characters.
        "CFTC1  F 1 0", "CFTC1 F 1 0 ", " CFTC1 F 1 0", "CFTC1 F +1 0", "CFTC1 F -1 0", "CFTC1 F 01 0", "CFTC1 F 1 00",
        "CFTC1 F 1.5 0", "CFTC1 F 1e9 0", "CFTC1 F 1 0\n", "CFTC1 X 1 0", "CFTC1 FF 1 0", "CFTC1 F 1", "CFTC1 F 1 0 0",
        // Boot ids: uppercase, short, missing dashes, not hex; and a fleet code's shape under M.
        "CFTC1 M 5B1F3C2E-9A0D-4E6F-8B7A-0C1D2E3F4A5B 1", "CFTC1 M 5b1f3c2e-9a0d-4e6f-8b7a-0c1d2e3f4a5 1",
        "CFTC1 M 5b1f3c2e09a0d-4e6f-8b7a-0c1d2e3f4a5b 1", "CFTC1 M 5b1f3c2e-9a0d-4e6f-8b7a-0c1d2e3f4a5g 1", "CFTC1 M 1 0",
        "CFTC1 M 5b1f3c2e-9a0d-4e6f-8b7a-0c1d2e3f4a5b", "CFTC1 M 5b1f3c2e-9a0d-4e6f-8b7a-0c1d2e3f4a5b x",
    ])
    func anythingElseIsNotATimecode(_ text: String) {
        #expect(ExposureTimecode(text: text) == nil)
    }

    @Test func aBootIdIsTheKernelsShape() {
        #expect(ExposureTimecode.isBootID(Array(Self.bootID.utf8)))
        #expect(!ExposureTimecode.isBootID(Array(Self.bootID.uppercased().utf8)))
        #expect(!ExposureTimecode.isBootID(Array("".utf8)))
    }
}
