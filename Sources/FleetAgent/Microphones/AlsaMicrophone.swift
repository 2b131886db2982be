import FleetAudio
import FleetCore
import FleetProtocol

/// An ALSA capture device as a microphone (microphones.md, "ALSA capture devices"): opened in
/// its active format at start, read a period at a time with the driver's timestamps.
struct AlsaMicrophone: MicrophoneSource {
    let device: AlsaCaptureDevice
    let format: AudioFormat

    init(device: AlsaCaptureDevice, format: AudioFormat? = nil) {
        self.device = device
        self.format = format ?? device.formats[0]
    }

    var isSynthetic: Bool { false }

    var descriptor: Capfleet_V1_DeviceDescriptor {
        .with {
            $0.deviceID = device.deviceID
            $0.name = device.pcmName.isEmpty || device.pcmName == device.cardName ? device.cardName : "\(device.cardName): \(device.pcmName)"
            $0.driver = device.driver
            $0.kind = .alsa
            $0.devicePath = device.alsaName
            $0.identitySource = "alsa-card-id"
            $0.audioFormats = device.formats.map(\.wire)
            $0.activeAudioFormatIndex = UInt32(device.formats.firstIndex(of: format) ?? 0)
        }
    }

    func capture(clock: ClockSync, running: () -> Bool, deliver: (inout [Int16], MicrophoneBlock) -> Void) throws {
        let capture = try AlsaCapture(name: device.alsaName, format: format)
        var samples: [Int16] = []
        while running() {
            // A short wait, so that stopping never waits long for a silent device.
            guard let block = try capture.read(into: &samples, maxFrames: capture.periodFrames * 4, timeoutMilliseconds: 100) else { continue }
            deliver(
                &samples,
                MicrophoneBlock(
                    frames: block.frames, firstFrameMonotonicNs: block.firstFrameMonotonicNs,
                    timestampSource: block.timestampSource == .driver ? .driver : .readTime, afterGap: block.afterGap))
        }
    }
}
