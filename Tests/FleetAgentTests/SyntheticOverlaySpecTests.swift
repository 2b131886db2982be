import FleetCapture
import FleetCore
import Foundation
import Testing

@testable import FleetAgent

/// `--synthetic-overlay` as a user writes it.
@Suite struct SyntheticOverlaySpecTests {
    @Test func aTimecodeNamesThisMachinesClockByItsBootID() throws {
        let overlay = try SyntheticOverlaySpec.parse("timecode@0.55,0.05,0.4")
        let bootID = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        guard case let .timecode(drawn) = overlay.content else {
            Issue.record("a timecode overlay draws a timecode: \(overlay.content)")
            return
        }
        #expect(drawn == bootID)
        #expect(overlay.origin == NormalizedPoint(x: 0.55, y: 0.05) && overlay.width == 0.4)
        #expect(overlay.image == nil, "drawn anew each frame, not a fixed picture")
    }

    @Test(arguments: ["timecode", "timecode:x@0.1,0.1,0.3", "timecode@0.1,0.1", "timecode@1.2,0.1,0.3", "timecodes@0.1,0.1,0.3"])
    func aMalformedSpecSaysHowToWriteOne(_ text: String) {
        #expect {
            _ = try SyntheticOverlaySpec.parse(text)
        } throws: { error in
            "\(error)".contains("timecode@X,Y,W")
        }
    }

    @Test func aQRCodeIsStillAFixedPicture() throws {
        #expect(try SyntheticOverlaySpec.parse("qr:capfleet-42@0.6,0.1,0.3").image != nil)
    }
}
