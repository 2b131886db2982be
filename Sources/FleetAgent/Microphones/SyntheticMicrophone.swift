import FleetCore
import FleetProtocol
import FleetSystem
import Foundation
import Synchronization

/// A synthetic microphone (microphones.md, "The synthetic microphone"): `SyntheticTone`'s
/// tone and clicks, 10 ms blocks paced by CLOCK_MONOTONIC on a thread of its own, each block's
/// fleet time from the agent's clock, metered per channel. Without consent its samples are
/// silence before anything measures them: nothing of what it hears leaves the host.
final class SyntheticMicrophone: Sendable {
    static let formats = [
        AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16le), AudioFormat(sampleRate: 48_000, channels: 1, sampleFormat: .s16le),
        AudioFormat(sampleRate: 44_100, channels: 2, sampleFormat: .s16le),
    ]
    static let blockNanoseconds: UInt64 = 10_000_000

    let deviceID: String
    let name: String
    let format: AudioFormat
    private struct Shared {
        var meter: AudioLevelMeter
        var framesCaptured: UInt64 = 0
        var allowed = false
    }

    /// What the capture thread and the agent's other threads (status, consent) share.
    private final class Box: Sendable {
        let shared: Mutex<Shared>
        let running = Atomic<Bool>(false)

        init(_ shared: Shared) { self.shared = Mutex(shared) }
    }

    private let box: Box
    private let thread: OwnedThread

    init(deviceID: String, name: String, allowed: Bool, format: AudioFormat = formats[0]) {
        self.deviceID = deviceID
        self.name = name
        self.format = format
        var state = Shared(meter: AudioLevelMeter(channels: format.channels, windowFrames: format.sampleRate))
        state.allowed = allowed
        box = Box(state)
        thread = OwnedThread(name: "cf-mic")
    }

    var descriptor: Capfleet_V1_DeviceDescriptor {
        .with {
            $0.deviceID = deviceID
            $0.name = name
            $0.driver = "capfleet-synthetic-microphone"
            $0.kind = .syntheticMicrophone
            $0.identitySource = "synthetic"
            $0.audioFormats = Self.formats.map(\.wire)
            $0.activeAudioFormatIndex = UInt32(Self.formats.firstIndex(of: format) ?? 0)
        }
    }

    func setAllowed(_ allowed: Bool) { box.shared.withLock { $0.allowed = allowed } }

    var isAllowed: Bool { box.shared.withLock { $0.allowed } }

    var counters: Capfleet_V1_DeviceCounters {
        box.shared.withLock { state in
            .with {
                $0.deviceID = deviceID
                $0.streaming = box.running.load(ordering: .relaxed)
                $0.realFrames = $0.streaming && state.allowed
                $0.audioLevels = state.meter.levels.map(\.wire)
                $0.audioFramesCaptured = state.framesCaptured
            }
        }
    }

    /// Starts capturing; `fleetTime` puts a CLOCK_MONOTONIC instant in fleet time (nil without).
    func start(fleetTime: @escaping @Sendable (UInt64) -> UInt64?) {
        guard !box.running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let (format, box) = (format, box)
        let frames = Int(UInt64(format.sampleRate) * Self.blockNanoseconds / 1_000_000_000)
        thread.start {
            let tone = SyntheticTone(format: format)
            var samples: [Int16] = []
            var index: UInt64 = 0
            var next = MonotonicTime.now() + Self.blockNanoseconds
            while box.running.load(ordering: .relaxed) {
                MonotonicTime.sleep(until: next)
                // The block's first sample was taken a block's length before it is whole.
                let first = next - Self.blockNanoseconds
                tone.render(into: &samples, frames: frames, index: index, fleetNs: fleetTime(first))
                box.shared.withLock { state in
                    if !state.allowed { for i in samples.indices { samples[i] = 0 } }
                    samples.withUnsafeBufferPointer { state.meter.add($0) }
                    state.framesCaptured += UInt64(frames)
                }
                index += UInt64(frames)
                next += Self.blockNanoseconds
            }
        }
    }

    func stop() {
        guard box.running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        thread.joinBlocking()
    }
}
