import FleetCore
import Foundation
import Testing

/// A microphone's processing settings and the high-pass filter (microphones.md, "Processing").
@Suite struct AudioProcessingSettingsTests {
    @Test func settingsOutOfRange_sayWhatIsAllowed_andOffIsZero() {
        #expect(AudioProcessingSettings.off.problem() == nil && !AudioProcessingSettings.off.isOn)
        #expect(AudioProcessingSettings(highPassHertz: 10, noiseSuppressionDecibels: 0, gainDecibels: 0).problem()?.contains("20 to 500 Hz") == true)
        #expect(AudioProcessingSettings(highPassHertz: 0, noiseSuppressionDecibels: 70, gainDecibels: 0).problem()?.contains("1 to 60 dB") == true)
        #expect(AudioProcessingSettings(highPassHertz: 0, noiseSuppressionDecibels: 0, gainDecibels: -41).problem()?.contains("-40 to +40") == true)
        #expect(AudioProcessingSettings(highPassHertz: .nan, noiseSuppressionDecibels: 0, gainDecibels: 0).problem() != nil)
        #expect(
            AudioProcessingSettings(highPassHertz: 500, noiseSuppressionDecibels: 0, gainDecibels: 0).problem(sampleRate: 1000)?.contains("too high")
                == true)
        let set = AudioProcessingSettings(highPassHertz: 80, noiseSuppressionDecibels: 30, gainDecibels: -6.5)
        #expect(set.problem(sampleRate: 48_000) == nil && set.isOn)
        #expect(set.summary == "high-pass 80 Hz, noise suppression 30 dB, gain -6.5 dB")
        #expect(AudioProcessingSettings(wire: set.wire) == set)
    }

    @Test func theTakesNote_isOneJSONObjectWithEveryStageAndTheDelay() throws {
        let json = AudioProcessingSettings(highPassHertz: 80, noiseSuppressionDecibels: 0, gainDecibels: 6).noteJSON(delayFrames: 960)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["kind"] as? String == "audio_processing")
        #expect(object["high_pass_hz"] as? Double == 80 && object["noise_suppression_db"] as? Double == 0 && object["gain_db"] as? Double == 6)
        #expect(object["delay_frames"] as? Int == 960)
    }

    /// A sine's RMS after the filter, over its last half (past the filter's settling).
    static func filteredRMS(hertz: Double, corner: Double, rate: Int = 48_000) -> Double {
        var filter = HighPassFilter(cornerHertz: corner, sampleRate: rate, channels: 2)
        let frames = rate
        var samples = [Int16](repeating: 0, count: frames * 2)
        for frame in 0..<frames {
            let value = Int16(10_000 * sin(2 * Double.pi * hertz * Double(frame) / Double(rate)))
            samples[2 * frame] = value
            samples[2 * frame + 1] = value
        }
        samples.withUnsafeMutableBufferPointer { filter.process($0, frames: frames) }
        var sum = 0.0
        for frame in (frames / 2)..<frames { sum += Double(samples[2 * frame + 1]) * Double(samples[2 * frame + 1]) }
        return (sum / Double(frames / 2)).squareRoot()
    }

    @Test func theHighPass_isFlatAboveItsCorner_3dBDownAtIt_and12dBAnOctaveBelow() {
        let input = 10_000 / 2.0.squareRoot()
        let passed = 20 * log10(Self.filteredRMS(hertz: 1000, corner: 80) / input)
        let atCorner = 20 * log10(Self.filteredRMS(hertz: 80, corner: 80) / input)
        let octaveBelow = 20 * log10(Self.filteredRMS(hertz: 40, corner: 80) / input)
        let decadeBelow = 20 * log10(Self.filteredRMS(hertz: 8, corner: 80) / input)
        #expect(abs(passed) < 0.1, "1 kHz: \(passed) dB")
        #expect(abs(atCorner + 3) < 0.3, "80 Hz: \(atCorner) dB")
        #expect(abs(octaveBelow + 12.3) < 1, "40 Hz: \(octaveBelow) dB")
        #expect(decadeBelow < -38, "8 Hz: \(decadeBelow) dB")
        let filter = HighPassFilter(cornerHertz: 80, sampleRate: 48_000, channels: 1)
        #expect(abs(filter.magnitude(atHertz: 80, sampleRate: 48_000) - 0.5.squareRoot()) < 0.001)
    }
}
