import FleetCapture
import FleetCore
import FleetProtocol
import Testing

@testable import FleetAgent

/// What an agent kept for pre-roll, read back for a still at an instant already past.
@Suite struct PreRollKeeperTests {
    private static let ms: UInt64 = 1_000_000

    /// Ten frames a second from 1 s: frame n captured at 1 s + n × 100 ms, sequence n.
    private func keeper(frames: Int) -> PreRollKeeper<PreRollFrame> {
        let keeper = PreRollKeeper<PreRollFrame>()
        keeper.change(to: PreRollSettings(seconds: 3))
        let pixels = FrameBuffer(unpooledCapacity: 16)
        for index in 0..<frames {
            keeper.keep(
                header: .with {
                    $0.sequence = UInt64(index)
                    $0.fleetTimeNs = 1_000 * Self.ms + UInt64(index) * 100 * Self.ms
                    $0.flags = UInt32(Capfleet_V1_FrameFlag.fleetTimeValid.rawValue)
                }, pixels: pixels, count: 16)
        }
        return keeper
    }

    @Test func theNearestKeptFrame_toAPastInstant_onEitherSide() {
        let kept = keeper(frames: 50)
        #expect(kept.nearest(to: 4_130 * Self.ms, within: 200 * Self.ms).frame?.header.sequence == 31)
        #expect(kept.nearest(to: 4_170 * Self.ms, within: 200 * Self.ms).frame?.header.sequence == 32)
        #expect(kept.nearest(to: 4_200 * Self.ms, within: 200 * Self.ms).frame?.header.sequence == 32, "a frame at the instant itself")
    }

    @Test func anInstantBeyondWhatIsKept_findsNothing_andSaysHowFarBackItReaches() {
        let kept = keeper(frames: 50)
        // Three seconds behind the newest (5.9 s): kept from 2.9 s on.
        let (frame, oldest) = kept.nearest(to: 2_000 * Self.ms, within: 200 * Self.ms)
        #expect(frame == nil && oldest == 2_900 * Self.ms)
        #expect(kept.nearest(to: 9_000 * Self.ms, within: 200 * Self.ms).frame == nil, "after the newest frame: nothing yet")
        let off = PreRollKeeper<PreRollFrame>()
        #expect(off.nearest(to: 1, within: 1).frame == nil && off.nearest(to: 1, within: 1).oldest == nil)
    }
}
