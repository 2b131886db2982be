import FleetProtocol

/// A microphone's sample layout (microphones.md): frames a second, channels, and how each
/// sample is stored, in ALSA's names.
public struct AudioFormat: Hashable, Sendable {
    public enum SampleFormat: String, Sendable, CaseIterable {
        case s16le = "S16_LE"
        case s32le = "S32_LE"
        case floatLE = "FLOAT_LE"
    }

    public var sampleRate: Int
    public var channels: Int
    public var sampleFormat: SampleFormat

    public init(sampleRate: Int, channels: Int, sampleFormat: SampleFormat) {
        self.sampleRate = sampleRate
        self.channels = channels
        self.sampleFormat = sampleFormat
    }

    /// "48 kHz 2 ch S16_LE".
    public var label: String {
        let rate = sampleRate % 1000 == 0 ? "\(sampleRate / 1000) kHz" : "\(Double(sampleRate) / 1000) kHz"
        return "\(rate) \(channels) ch \(sampleFormat.rawValue)"
    }

    public var wire: Capfleet_V1_AudioFormat {
        .with {
            $0.sampleRate = UInt32(clamping: sampleRate)
            $0.channels = UInt32(clamping: channels)
            $0.sampleFormat = sampleFormat.rawValue
        }
    }

    public init?(wire: Capfleet_V1_AudioFormat) {
        guard let format = SampleFormat(rawValue: wire.sampleFormat), wire.sampleRate > 0, wire.channels > 0 else { return nil }
        self.init(sampleRate: Int(wire.sampleRate), channels: Int(wire.channels), sampleFormat: format)
    }
}
