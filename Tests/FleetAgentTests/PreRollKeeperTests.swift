import FleetCapture
import FleetCore
import FleetProtocol
import Foundation
import Logging
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

/// An encoded pre-roll's disk (recordings.md, "On disk"): what a small memory budget lets go of
/// the window is written to files and read back, packets and headers as they were.
@Suite struct PreRollDiskTests {
    private static let ms: UInt64 = 1_000_000

    @Test func whatTheMemoryLetsGo_isKeptOnDisk_andReadBackWhole() async throws {
        let directory = NSTemporaryDirectory() + "capfleet-preroll-disk-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let keeper = PreRollKeeper<PreRollFrame>()
        // 10 s kept within 1 MiB of memory and 64 MiB of disk; packets of 64 KiB, 10 a second,
        // a key frame every second: the memory holds under two seconds.
        let settings = PreRollSettings(seconds: 10, budgetBytes: 1 << 20, encoding: TakeEncoding(codec: .h264), diskBudgetBytes: 64 << 20)
        keeper.useDisk(for: settings, directory: directory, deviceID: "cam", logger: Logger(label: "test"))
        keeper.change(to: settings)
        for index in 0..<60 {
            let pixels = FrameBuffer(unpooledCapacity: 65_536)
            pixels.storage.initializeMemory(as: UInt8.self, repeating: UInt8(index), count: 65_536)
            keeper.keepPacket(
                header: .with {
                    $0.sequence = UInt64(index)
                    $0.fleetTimeNs = 1_000 * Self.ms + UInt64(index) * 100 * Self.ms
                    $0.flags =
                        UInt32(Capfleet_V1_FrameFlag.fleetTimeValid.rawValue)
                        | (index % 10 == 0 ? UInt32(Capfleet_V1_FrameFlag.keyFrame.rawValue) : 0)
                    $0.encoded = .with { $0.codec = .h264 }
                }, pixels: pixels, count: 65_536)
        }
        let figures = try #require(keeper.figures)
        #expect(figures.keptBytes <= 1 << 20 && figures.keptDiskBytes >= 3 * 655_360, "memory within its budget, the rest on disk: \(figures)")
        #expect(figures.keptNs >= 5_000 * Self.ms, "six seconds kept in all: \(figures.keptNs)")
        // Written by the disk's thread: the files appear.
        for _ in 0..<100 where (try? FileManager.default.contentsOfDirectory(atPath: directory))?.count ?? 0 < 3 {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect((try FileManager.default.contentsOfDirectory(atPath: directory)).count >= 3)
        let all = keeper.keptIncludingDisk(from: 2_000 * Self.ms)
        #expect(all.map(\.header.sequence) == Array(10..<60).map(UInt64.init), "from 2 s on, disk then memory, every packet once")
        #expect(all.allSatisfy { $0.count == 65_536 && $0.pixels.storage.load(as: UInt8.self) == UInt8($0.header.sequence) }, "their bytes as kept")
        let group = keeper.decodable(nearest: 2_330 * Self.ms, within: 200 * Self.ms)
        #expect(group.map(\.header.sequence) == [10, 11, 12, 13], "from its key frame through the frame nearest the instant")
        keeper.forget()
        for _ in 0..<100 where (try? FileManager.default.contentsOfDirectory(atPath: directory))?.isEmpty == false {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty, "consent withdrawn: nothing left on disk")
    }
}
