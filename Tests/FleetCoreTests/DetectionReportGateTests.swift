import FleetCore
import Testing

@Suite struct DetectionReportGateTests {
    /// Which of these frames (by their object counts) are reported, in order.
    static func reported(_ counts: [Int]) -> [Bool] {
        var gate = DetectionReportGate()
        return counts.map { gate.shouldReport(objectCount: $0) }
    }

    @Test func framesWithoutObjects_areNotReported_untilSomethingWasSeen() {
        #expect(Self.reported([0, 0, 0]) == [false, false, false])
    }

    @Test func everyFrameWithObjects_isReported_andTheFirstEmptyOneOnce() {
        #expect(Self.reported([2, 1, 0, 0, 3, 0, 0]) == [true, true, true, false, true, true, false])
    }

    /// The gate knows nothing of settings: detectors rebuilt for a narrower region that find
    /// nothing any more still owe the subscriber its "all gone".
    @Test func objectsLeftOutByNewSettings_areReportedGone() {
        var gate = DetectionReportGate()
        let code = gate.shouldReport(objectCount: 1)  // the code, with the whole frame
        let narrowed = gate.shouldReport(objectCount: 0)  // the region narrows: nothing found
        let after = gate.shouldReport(objectCount: 0)
        #expect(code && narrowed && !after, "the empty report says the code is gone, once")
        #expect(!gate.lastReportHadObjects)
    }
}
