import FleetCore
import Testing

/// A device's recent frames kept for pre-roll: by time and by budget, taken by a take.
@Suite struct PreRollRingTests {
    /// Ten frames a second, each `bytes` long, from 1 s on; their payloads are their indexes.
    private func fill(_ ring: inout PreRollRing<Int>, frames: Range<Int>, bytes: Int = 100) -> [Int] {
        frames.flatMap { ring.append(fleetTime: 1_000_000_000 + UInt64($0) * 100_000_000, bytes: bytes, payload: $0) }
    }

    @Test func theWindow_keepsTheLastSeconds_andGivesBackWhatFallsOutOfIt() {
        var ring = PreRollRing<Int>(settings: PreRollSettings(seconds: 2))
        let evicted = fill(&ring, frames: 0..<50)
        // The newest at 5.9 s: kept back to 3.9 s, 21 frames; the rest came back in order.
        #expect(ring.count == 21 && ring.keptNanoseconds == 2_000_000_000)
        #expect(evicted == Array(0..<29))
        #expect(ring.keptBytes == 2_100)
    }

    @Test func theBudget_keepsLessTimeWhenTheFramesAreLarge() {
        var ring = PreRollRing<Int>(settings: PreRollSettings(seconds: 5, budgetBytes: 1 << 20))
        let evicted = fill(&ring, frames: 0..<30, bytes: 300_000)
        // Three 300 kB frames fit a MiB: 0.2 s kept where 5 s were asked for.
        #expect(ring.count == 3 && ring.keptNanoseconds == 200_000_000 && evicted == Array(0..<27))
        // A frame larger than the whole budget is not kept at all.
        #expect(ring.append(fleetTime: 9_000_000_000, bytes: 2 << 20, payload: 99) == [99])
    }

    @Test func aTake_getsTheFramesFromItsStart_andAllStayKeptForTheNext() {
        var ring = PreRollRing<Int>(settings: PreRollSettings(seconds: 3))
        _ = fill(&ring, frames: 0..<20)
        let taken = ring.frames(from: 2_450_000_000)
        #expect(taken.map(\.payload) == Array(15..<20) && taken.first?.fleetTime == 2_500_000_000)
        #expect(ring.count == 20 && ring.keptBytes == 2_000)
        #expect(ring.frames(from: 9_000_000_000).isEmpty)
    }

    @Test func off_keepsNothing_andTurningItOffGivesEverythingBack() {
        var off = PreRollRing<Int>(settings: .off)
        #expect(off.append(fleetTime: 1, bytes: 1, payload: 7) == [7] && off.count == 0)
        var ring = PreRollRing<Int>(settings: PreRollSettings(seconds: 2))
        _ = fill(&ring, frames: 0..<10)
        #expect(ring.change(to: PreRollSettings(seconds: 0.5)) == Array(0..<4))
        #expect(ring.change(to: .off) == Array(4..<10) && ring.count == 0 && ring.keptBytes == 0)
        #expect(PreRollSettings(seconds: 61).refusal != nil && PreRollSettings(seconds: 5, budgetBytes: 1000).refusal != nil)
        #expect(PreRollSettings(seconds: 5).refusal == nil)
    }

    @Test func manyFrames_compactWithoutLosingOrder() {
        var ring = PreRollRing<Int>(settings: PreRollSettings(seconds: 1))
        let evicted = fill(&ring, frames: 0..<1_000)
        #expect(evicted == Array(0..<989) && ring.frames(from: 0).map(\.payload) == Array(989..<1_000))
    }

    @Test func pressure_shrinksTheBudget_andEasingLetsItGrowAgain() {
        var ring = PreRollRing<Int>(settings: PreRollSettings(seconds: 10, budgetBytes: 1 << 20))
        // 100 frames of 10 kB: a MiB holds all of them.
        _ = fill(&ring, frames: 0..<100, bytes: 10_000)
        #expect(ring.count == 100 && ring.budgetInForce == 1 << 20)
        // Serious: half a MiB, the newest 52 frames.
        #expect(ring.pressureChanged(to: .serious) == Array(0..<48) && ring.keptBytes <= 1 << 19)
        #expect(ring.pressureChanged(to: .critical).count == 26 && ring.count == 26 && ring.budgetInForce == 1 << 18)
        // Appending keeps to the smaller budget.
        _ = fill(&ring, frames: 100..<110, bytes: 10_000)
        #expect(ring.count == 26)
        // Shutdown keeps nothing; eased, the ring fills to the whole budget again.
        #expect(ring.pressureChanged(to: .shutdown).count == 26 && ring.count == 0)
        _ = ring.pressureChanged(to: .nominal)
        _ = fill(&ring, frames: 110..<210, bytes: 10_000)
        #expect(ring.count == 100)
    }

    /// A frame let go is let go at once: its memory must not wait for the ring to compact
    /// (it kept up to as many frames again as it held: an agent keeping 593 MiB of 1080p frames
    /// held over a GiB).
    @Test func anEvictedFrame_isReleasedAtOnce_notWhenTheRingCompacts() {
        final class Frame {}
        var ring = PreRollRing<Frame>(settings: PreRollSettings(seconds: 1))
        var watched: [Int: () -> Frame?] = [:]
        for index in 0..<40 {
            let frame = Frame()
            weak let weakFrame = frame
            watched[index] = { weakFrame }
            _ = ring.append(fleetTime: UInt64(index) * 100_000_000, bytes: 1, payload: frame)
        }
        // Kept: the last second (frames 29 to 39); everything before is gone already.
        #expect(ring.count == 11)
        #expect((0..<29).allSatisfy { watched[$0]?() == nil }, "evicted frames are released")
        #expect((29..<40).allSatisfy { watched[$0]?() != nil }, "kept frames are kept")
    }

    /// Packets of an encoded pre-roll in groups of `group` (ten a second), each led by a key frame.
    private func fillPackets(_ ring: inout PreRollRing<Int>, packets: Range<Int>, group: Int, bytes: Int = 100) -> [Int] {
        packets.flatMap {
            ring.append(fleetTime: 1_000_000_000 + UInt64($0) * 100_000_000, bytes: bytes, startsGroup: $0 % group == 0, payload: $0)
        }
    }

    @Test func encodedPackets_goWholeGroupsAtATime_andWhatIsKeptBeginsAtAKeyFrame() {
        let encoding = TakeEncoding(codec: .h264)
        var ring = PreRollRing<Int>(settings: PreRollSettings(seconds: 2, encoding: encoding))
        let evicted = fillPackets(&ring, packets: 0..<50, group: 10)
        // The newest at 5.9 s: the window (two seconds and the key-frame interval) keeps the
        // group from 3.0 s, which holds 3.9 s; the groups before it went whole, in order.
        #expect(evicted == Array(0..<20), "\(evicted)")
        #expect(ring.frames(from: 0).first?.payload == 20 && ring.frames(from: 0).first?.startsGroup == true)
        // A budget that holds 25 packets keeps two whole groups and the one being made.
        var tight = PreRollRing<Int>(settings: PreRollSettings(seconds: 60, budgetBytes: 2_500, encoding: encoding))
        _ = fillPackets(&tight, packets: 0..<45, group: 10)
        #expect(tight.frames(from: 0).map(\.payload) == Array(20..<45) && tight.keptBytes == 2_500)
        // A packet that begins no group, with nothing before it, could not be decoded: refused.
        var empty = PreRollRing<Int>(settings: PreRollSettings(seconds: 2, encoding: encoding))
        #expect(empty.append(fleetTime: 1, bytes: 1, startsGroup: false, payload: 7) == [7] && empty.count == 0)
        // Pressure halves the budget: whole groups go.
        #expect(tight.pressureChanged(to: .serious) == Array(20..<40) && tight.frames(from: 0).first?.payload == 40)
    }

    @Test func aTakeReachingIntoAnEncodedPreRoll_startsOnTheWholeSecondBeforeIt() {
        let instant: UInt64 = 1_796_205_362_400_000_000
        #expect(PreRollSettings.takeStart(instant: instant, milliseconds: 3_000, encoded: false) == 1_796_205_359_400_000_000)
        #expect(PreRollSettings.takeStart(instant: instant, milliseconds: 3_000, encoded: true) == 1_796_205_359_000_000_000)
        #expect(PreRollSettings.takeStart(instant: instant, milliseconds: 0, encoded: true) == instant)
        // Raw settings carry no encoding; a stabilised encoder is refused (it alters the pixels).
        #expect(PreRollSettings(seconds: 5, encoding: .raw).encoding == nil)
        #expect(PreRollSettings(seconds: 5, encoding: TakeEncoding(codec: .h264, stabilisation: .deshake)).refusal?.contains("--stabilise") == true)
        #expect(PreRollSettings(seconds: 5, encoding: TakeEncoding(codec: .h264, quality: 70)).refusal?.contains("--quality") == true)
        // The window of an encoded pre-roll reaches a key-frame interval further.
        #expect(PreRollSettings(seconds: 5, encoding: TakeEncoding(codec: .hevc)).windowNanoseconds == 6_000_000_000)
    }
}
