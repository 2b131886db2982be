import FleetProtocol

/// A microphone's processing (microphones.md, "Processing"), like the microphone modes of the
/// camera APIs: a high-pass filter, noise suppression and a gain, applied in that order on the
/// microphone's host. Zero turns a stage off; all zero leaves the samples as captured.
public struct AudioProcessingSettings: Hashable, Sendable, Codable {
    /// The high-pass filter's corner, Hz (second-order Butterworth); 0 = off.
    public var highPassHertz: Double
    /// speexdsp's noise suppression: noise attenuated by at most this much, dB; 0 = off.
    public var noiseSuppressionDecibels: Double
    /// Gain applied last, dB, clipped at full scale; 0 = off.
    public var gainDecibels: Double

    public static let off = AudioProcessingSettings(highPassHertz: 0, noiseSuppressionDecibels: 0, gainDecibels: 0)
    public static let highPassRange: ClosedRange<Double> = 20...500
    public static let noiseSuppressionRange: ClosedRange<Double> = 1...60
    public static let gainRange: ClosedRange<Double> = -40...40

    public init(highPassHertz: Double, noiseSuppressionDecibels: Double, gainDecibels: Double) {
        self.highPassHertz = highPassHertz
        self.noiseSuppressionDecibels = noiseSuppressionDecibels
        self.gainDecibels = gainDecibels
    }

    public var isOn: Bool { highPassHertz != 0 || noiseSuppressionDecibels != 0 || gainDecibels != 0 }

    /// What is wrong with the settings, said so an operator can fix the command; nil when valid.
    public func problem(sampleRate: Int? = nil) -> String? {
        if !highPassHertz.isFinite || !noiseSuppressionDecibels.isFinite || !gainDecibels.isFinite {
            return "the processing's figures must be numbers"
        }
        if highPassHertz != 0, !Self.highPassRange.contains(highPassHertz) {
            return "the high-pass corner is 20 to 500 Hz (or off), not \(Self.trim(highPassHertz)) Hz"
        }
        if let sampleRate, highPassHertz != 0, highPassHertz >= Double(sampleRate) / 4 {
            return "a \(Self.trim(highPassHertz)) Hz high-pass is too high for \(sampleRate) Hz sound"
        }
        if noiseSuppressionDecibels != 0, !Self.noiseSuppressionRange.contains(noiseSuppressionDecibels) {
            return "noise suppression is 1 to 60 dB (or off), not \(Self.trim(noiseSuppressionDecibels)) dB"
        }
        if gainDecibels != 0, !Self.gainRange.contains(gainDecibels) {
            return "the gain is -40 to +40 dB, not \(Self.trim(gainDecibels)) dB"
        }
        return nil
    }

    public init(wire: Capfleet_V1_AudioProcessing) {
        self.init(highPassHertz: wire.highPassHz, noiseSuppressionDecibels: wire.noiseSuppressionDb, gainDecibels: wire.gainDb)
    }

    public var wire: Capfleet_V1_AudioProcessing {
        .with {
            $0.highPassHz = highPassHertz
            $0.noiseSuppressionDb = noiseSuppressionDecibels
            $0.gainDb = gainDecibels
        }
    }

    /// "high-pass 80 Hz, noise suppression 30 dB, gain +6 dB", or "off".
    public var summary: String {
        var parts: [String] = []
        if highPassHertz != 0 { parts.append("high-pass \(Self.trim(highPassHertz)) Hz") }
        if noiseSuppressionDecibels != 0 { parts.append("noise suppression \(Self.trim(noiseSuppressionDecibels)) dB") }
        if gainDecibels != 0 { parts.append("gain \(gainDecibels > 0 ? "+" : "")\(Self.trim(gainDecibels)) dB") }
        return parts.isEmpty ? "off" : parts.joined(separator: ", ")
    }

    /// The take's timed-metadata entry (recordings.md, "Sound"): what was done to the sound
    /// from this entry's time on, and the delay it added (already out of the blocks' times).
    public func noteJSON(delayFrames: Int) -> String {
        #"{"kind":"audio_processing","high_pass_hz":\#(Self.trim(highPassHertz)),"noise_suppression_db":\#(Self.trim(noiseSuppressionDecibels)),"gain_db":\#(Self.trim(gainDecibels)),"delay_frames":\#(delayFrames)}"#
    }

    private static func trim(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e9 ? String(Int(value)) : String(value)
    }
}
