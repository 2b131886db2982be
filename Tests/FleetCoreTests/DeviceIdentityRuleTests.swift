import FleetCore
import Testing

@Suite struct DeviceIdentityRuleTests {
    @Test func idsOfEveryKindThisProjectMakes_keepToTheRule() {
        #expect(DeviceIdentityRule.problem(with: "v4l2-usb-Acme_C1_0042-video-index0", kind: .v4l2) == nil)
        #expect(DeviceIdentityRule.problem(with: "syn-7f3a-1", kind: .synthetic) == nil)
        #expect(DeviceIdentityRule.problem(with: "gige-Basler_a2A1920-40123456", kind: .external) == nil)
    }

    @Test func anExternalCamera_mayNotClaimAnotherKindsPrefix() {
        let problem = DeviceIdentityRule.problem(with: "syn-7f3a-1", kind: .external)
        #expect(problem?.contains("only synthetic devices use") == true)
        #expect(DeviceIdentityRule.problem(with: "v4l2-usb-cam", kind: .external)?.contains("only v4l2 devices") == true)
        #expect(DeviceIdentityRule.problem(with: "v4l2-usb-cam", kind: .synthetic) != nil)
    }

    @Test func idsThatShellsAndFileNamesCannotTake_areRefusedNamingTheCharacter() {
        #expect(DeviceIdentityRule.problem(with: "rtsp://10.0.0.7/stream", kind: .external)?.contains("\":\"") == true)
        #expect(DeviceIdentityRule.problem(with: "cam 1", kind: .external)?.contains("A-Z a-z 0-9 . _ -") == true)
        #expect(DeviceIdentityRule.problem(with: "../etc", kind: .external) != nil)
        #expect(DeviceIdentityRule.problem(with: "-rf", kind: .external)?.contains("starts with") == true)
        #expect(DeviceIdentityRule.problem(with: "", kind: .external) != nil)
        #expect(DeviceIdentityRule.problem(with: String(repeating: "a", count: 129), kind: .external)?.contains("at most 128") == true)
        #expect(DeviceIdentityRule.problem(with: String(repeating: "a", count: 128), kind: .external) == nil)
    }
}
