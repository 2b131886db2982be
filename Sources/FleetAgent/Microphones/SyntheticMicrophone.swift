import FleetCore
import FleetProtocol
import FleetSystem

/// A synthetic microphone (microphones.md, "The synthetic microphone"): `SyntheticTone`'s
/// tone and clicks, 10 ms blocks paced by CLOCK_MONOTONIC, each block's clicks placed by the
/// agent's fleet time.
struct SyntheticMicrophone: MicrophoneSource {
    static let formats = [
        AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16le), AudioFormat(sampleRate: 48_000, channels: 1, sampleFormat: .s16le),
        AudioFormat(sampleRate: 44_100, channels: 2, sampleFormat: .s16le),
    ]
    static let blockNanoseconds: UInt64 = 10_000_000

    let deviceID: String
    let name: String
    let format: AudioFormat

    init(deviceID: String, name: String, format: AudioFormat = formats[0]) {
        self.deviceID = deviceID
        self.name = name
        self.format = format
    }

    var isSynthetic: Bool { true }

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

    func capture(clock: ClockSync, running: () -> Bool, deliver: (inout [Int16], MicrophoneBlock) -> Void) throws {
        let frames = Int(UInt64(format.sampleRate) * Self.blockNanoseconds / 1_000_000_000)
        let tone = SyntheticTone(format: format)
        var samples: [Int16] = []
        var index: UInt64 = 0
        var next = MonotonicTime.now() + Self.blockNanoseconds
        while running() {
            MonotonicTime.sleep(until: next)
            // The block's first sample was taken a block's length before it is whole.
            let first = next - Self.blockNanoseconds
            tone.render(into: &samples, frames: frames, index: index, fleetNs: clock.stamp(captureMonotonic: first)?.fleet)
            deliver(&samples, MicrophoneBlock(frames: frames, firstFrameMonotonicNs: first, timestampSource: .paced))
            index += UInt64(frames)
            next += Self.blockNanoseconds
        }
    }
}
