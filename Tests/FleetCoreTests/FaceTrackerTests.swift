import FleetCore
import Testing

@Suite struct FaceTrackerTests {
    static func box(_ x: Double, _ y: Double, _ side: Double = 0.2) -> NormalizedRect { NormalizedRect(x: x, y: y, width: side, height: side) }

    @Test func aFaceThatMovesALittle_keepsItsID_andANewFaceGetsTheNextOne() {
        var tracker = FaceTracker()
        let first = tracker.update([Self.box(0.1, 0.1)])
        #expect(first.map(\.id) == [1])
        let moved = tracker.update([Self.box(0.6, 0.5), Self.box(0.12, 0.11)])
        #expect(moved.map(\.id) == [2, 1], "the moved face is still 1; the new one is 2")
    }

    @Test func twoFacesCrossing_areMatchedByTheBestOverlapFirst() {
        var tracker = FaceTracker()
        _ = tracker.update([Self.box(0.10, 0.1), Self.box(0.25, 0.1)])
        let next = tracker.update([Self.box(0.26, 0.1), Self.box(0.11, 0.1)])
        #expect(next.map(\.id) == [2, 1])
    }

    @Test func aFaceUnseenLongerThanThePatience_isForgotten_andComesBackAsANewFace() {
        var tracker = FaceTracker(patience: 2)
        _ = tracker.update([Self.box(0.3, 0.3)])
        _ = tracker.update([])
        _ = tracker.update([])
        #expect(tracker.update([Self.box(0.3, 0.3)]).map(\.id) == [1], "two frames unseen: still tracked")
        _ = tracker.update([])
        _ = tracker.update([])
        _ = tracker.update([])
        #expect(tracker.update([Self.box(0.3, 0.3)]).map(\.id) == [2], "three frames unseen: a new face")
    }

    @Test func overlap_isIntersectionOverUnion() {
        #expect(Self.box(0, 0, 0.2).overlap(with: Self.box(0, 0, 0.2)) == 1)
        #expect(Self.box(0, 0, 0.2).overlap(with: Self.box(0.5, 0.5, 0.2)) == 0)
        let half = NormalizedRect(x: 0, y: 0, width: 0.2, height: 0.2).overlap(with: NormalizedRect(x: 0.1, y: 0, width: 0.2, height: 0.2))
        #expect(abs(half - 1.0 / 3.0) < 1e-12)
    }
}
