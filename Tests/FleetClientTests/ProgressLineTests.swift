import FleetClient
import Testing

@Suite struct ProgressLineTests {
    static let mib: UInt64 = 1 << 20

    @Test func aDownloadHalfwayAtTenMiBPerSecond_saysSoAndHowLongIsLeft() {
        let line = ProgressLine(label: "export t1", done: 50 * Self.mib, total: 100 * Self.mib, elapsedSeconds: 5)
        #expect(line.text == "export t1 [############------------]  50% 50.0 MiB of 100.0 MiB, 10.0 MiB/s, 5 s left")
    }

    @Test func theRateWaitsForSomethingToMeasure() {
        #expect(ProgressLine(label: "backup", done: 0, total: 10 * Self.mib, elapsedSeconds: 3).rate == nil)
        #expect(ProgressLine(label: "backup", done: Self.mib, total: 10 * Self.mib, elapsedSeconds: 0.05).secondsLeft == nil)
    }

    @Test func aFinishedTransfer_showsAFullBarAndNoTimeLeft() {
        let line = ProgressLine(label: "restore", done: 3 * Self.mib, total: 3 * Self.mib, elapsedSeconds: 2)
        #expect(line.text.contains("[########################] 100%"))
        #expect(!line.text.contains("left"))
    }

    @Test func countsOtherThanBytes_nameTheirUnit() {
        let line = ProgressLine(label: "verify t1", done: 3, total: 12, elapsedSeconds: 1.5, unit: "segments")
        #expect(line.text.contains("3 of 12 segments, 2.0 segments/s, 5 s left"))
    }

    @Test func durations_readAsAPersonWouldSayThem() {
        #expect(ProgressLine.duration(41.2) == "42 s")
        #expect(ProgressLine.duration(185) == "3 min 05 s")
        #expect(ProgressLine.duration(3720) == "1 h 02 min")
    }
}
