import FleetCore
import Testing

/// Frame sets (recordings.md, "Frame sets"): the nearest frame of every camera per slot,
/// with slots placed in the middle of free-running cameras' frames.
struct FrameSetMakerTests {
    let origin: UInt64 = 1_800_000_000_000_000_000
    let interval: UInt64 = 40_000_000  // 25 fps

    /// `count` frames from `first` (ns from the origin) `interval` apart, `jitter(i)` added.
    func camera(_ first: Int64, count: Int, every: UInt64? = nil, jitter: (Int) -> Int64 = { _ in 0 }, skipping: Set<Int> = []) -> [FrameTime] {
        (0..<count).filter { !skipping.contains($0) }.map { index in
            FrameTime(
                sequence: UInt64(1000 + index),
                fleetTime: UInt64(Int64(origin) + first + Int64(index) * Int64(every ?? interval) + jitter(index)))
        }
    }

    @Test func twoFreeRunningCameras_pairEveryFrame_withTheirPhaseDifferenceAsSpread() {
        // The vivid measurement: phases −18.5 ms and −7.9 ms against the grid.
        var maker = FrameSetMaker(
            cameras: [camera(-18_500_000, count: 250), camera(-7_900_000, count: 250)], gridOrigin: origin, interval: interval,
            tolerance: 1_000_000)
        let summary = maker.finish()
        #expect(summary.sets == 250)
        #expect(summary.complete == 250)
        #expect(summary.overTolerance == 250, "10.6 ms apart is over a 1 ms tolerance")
        #expect(summary.spread.median >= 10_600_000 && summary.spread.median <= 10_600_000 * 103 / 100)
        #expect(summary.cameras.map(\.paired) == [250, 250])
        #expect(summary.cameras.map(\.missing) == [0, 0])
        // The slots sit between the two cameras' phases.
        #expect(abs(maker.slotShift - -13_200_000) <= 1000)
    }

    @Test func framesOnASlotEdge_doNotJitterBetweenSlots() {
        // ±19.9 ms from the grid with ±0.3 ms of jitter: on a fixed grid, half the frames of
        // each camera would fall into the neighbouring slot.
        let wobble: (Int) -> Int64 = { $0 % 2 == 0 ? 300_000 : -300_000 }
        var maker = FrameSetMaker(
            cameras: [camera(19_900_000, count: 100, jitter: wobble), camera(19_700_000, count: 100, jitter: { -wobble($0) })],
            gridOrigin: origin, interval: interval, tolerance: 2_000_000)
        let summary = maker.finish()
        #expect(summary.sets == 100)
        #expect(summary.complete == 100)
        #expect(summary.spread.max <= 800_000)
        #expect(summary.overTolerance == 0)
    }

    @Test func steeredCameras_stayOnTheGrid_andADroppedFrameLeavesAnIncompleteSet() {
        var maker = FrameSetMaker(
            cameras: [camera(10_000, count: 50), camera(-20_000, count: 50, skipping: [17])], gridOrigin: origin, interval: interval,
            tolerance: 100_000)
        var sets: [FrameSetMaker.FrameSet] = []
        while let set = maker.next() { sets.append(set) }
        #expect(abs(maker.slotShift) <= 6_000)
        #expect(sets.count == 50)
        let incomplete = sets.filter { !$0.complete }
        #expect(incomplete.count == 1)
        #expect(incomplete.first?.members.map(\.camera) == [0])
        #expect(incomplete.first?.members.first?.sequence == 1017)
        #expect(maker.summary.cameras[1].missing == 1)
        #expect(sets.filter(\.complete).allSatisfy { $0.spread == 30_000 && !$0.overTolerance })
        let member = sets[3].members[1]
        #expect(member.sequence == 1003 && member.offset == Int64(member.fleetTime) - Int64(sets[3].slot))
    }

    @Test func aFasterCamera_givesItsNearestFrame_andTheRestAreUnpaired() {
        // 50 fps against 25 fps slots: two frames per slot, the nearer one paired.
        var maker = FrameSetMaker(
            cameras: [camera(0, count: 100), camera(3_000_000, count: 199, every: 20_000_000)], gridOrigin: origin, interval: interval,
            tolerance: 5_000_000)
        var sets: [FrameSetMaker.FrameSet] = []
        while let set = maker.next() { sets.append(set) }
        let summary = maker.summary
        #expect(summary.cameras[0].paired == 100)
        #expect(summary.cameras[1].paired == 100 && summary.cameras[1].frames == 199)
        // Every other frame of the fast camera (sequences 1000, 1002, …) is nearest its slot.
        #expect(sets.prefix(10).allSatisfy { $0.members.count == 2 && $0.members[1].sequence % 2 == 0 })
    }

    @Test func noFrames_noSets() {
        var maker = FrameSetMaker(cameras: [[], []], gridOrigin: origin, interval: interval, tolerance: 1)
        #expect(maker.next() == nil)
        #expect(maker.summary.sets == 0)
    }
}
