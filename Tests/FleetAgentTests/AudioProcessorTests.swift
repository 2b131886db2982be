import FleetAudio
import FleetCore
import Foundation
import Testing

/// The processing chain a microphone's thread runs (microphones.md, "Processing"): speexdsp's
/// noise suppression re-framed for blocks of any length, its delay fixed and known, gain and
/// clipping.
@Suite struct AudioProcessorTests {
    /// Stereo blocks of uneven lengths through `processor`; returns the output, interleaved.
    static func run(_ processor: AudioProcessor, _ input: [Int16], blocks: [Int] = [173, 480, 960, 37, 511]) -> [Int16] {
        var output: [Int16] = []
        var start = 0
        var turn = 0
        let frames = input.count / 2
        while start < frames {
            let count = min(blocks[turn % blocks.count], frames - start)
            turn += 1
            var block = Array(input[(2 * start)..<(2 * (start + count))])
            processor.process(&block, frames: count)
            output += block
            start += count
        }
        return output
    }

    /// Clicks (a 1 ms burst at 20 000) every 100 ms over silence, at frames 1000 + 4800 k.
    static func clicks(seconds: Int) -> [Int16] {
        var samples = [Int16](repeating: 0, count: 48_000 * seconds * 2)
        for start in stride(from: 1000, to: 48_000 * seconds - 48, by: 4800) {
            for offset in 0..<48 {
                let value: Int16 = offset % 2 == 0 ? 20_000 : -20_000
                samples[2 * (start + offset)] = value
                samples[2 * (start + offset) + 1] = value
            }
        }
        return samples
    }

    @Test func noiseSuppression_delaysBy20ms_whateverTheBlocks_andSaysSo() throws {
        let processor = try AudioProcessor(
            settings: AudioProcessingSettings(highPassHertz: 0, noiseSuppressionDecibels: 30, gainDecibels: 0), sampleRate: 48_000, channels: 2)
        #expect(processor.delayFrames == 960)
        let output = Self.run(processor, Self.clicks(seconds: 3))
        // Where each click's first loud sample lands, on both channels.
        var found: [Int] = []
        var frame = 0
        while frame < output.count / 2 {
            if abs(Int(output[2 * frame])) > 8000, abs(Int(output[2 * frame + 1])) > 8000 {
                found.append(frame)
                frame += 2400
            } else {
                frame += 1
            }
        }
        let expected = stride(from: 1000, to: 48_000 * 3 - 48 - 960, by: 4800).map { $0 + 960 }
        // The suppressor needs a few frames to settle; every click from then on is where the delay says.
        let settled = found.filter { $0 > 4800 }
        #expect(settled.count >= expected.count - 2, "\(found)")
        for click in settled {
            let nearest = try #require(expected.min { abs($0 - click) < abs($1 - click) })
            #expect(abs(click - nearest) <= 2, "a click at \(click), expected \(nearest)")
        }
    }

    @Test func noiseSuppression_lowersSteadyNoise_byAtLeast10dB() throws {
        let processor = try AudioProcessor(
            settings: AudioProcessingSettings(highPassHertz: 0, noiseSuppressionDecibels: 30, gainDecibels: 0), sampleRate: 48_000, channels: 2)
        var generator = SystemRandomNumberGenerator()
        let noise = (0..<(48_000 * 4 * 2)).map { _ in Int16.random(in: -300...300, using: &generator) }
        let output = Self.run(processor, noise)
        func rms(_ samples: ArraySlice<Int16>) -> Double {
            (samples.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(samples.count)).squareRoot()
        }
        let lastSecond = (48_000 * 3 * 2)..<(48_000 * 4 * 2)
        let lowered = 20 * log10(rms(noise[lastSecond]) / max(rms(output[lastSecond]), 1e-9))
        print("noise suppression 30 dB: steady noise lowered by \(lowered) dB")
        #expect(lowered >= 10)
    }

    @Test func gain_scalesAndClips_andAddsNoDelay() throws {
        let processor = try AudioProcessor(
            settings: AudioProcessingSettings(highPassHertz: 0, noiseSuppressionDecibels: 0, gainDecibels: 6), sampleRate: 48_000, channels: 2)
        #expect(processor.delayFrames == 0)
        var block: [Int16] = [1000, -1000, 20_000, -20_000]
        processor.process(&block, frames: 2)
        #expect(abs(Int(block[0]) - 1995) <= 1 && abs(Int(block[1]) + 1995) <= 1)
        #expect(block[2] == Int16.max && block[3] == Int16.min)
    }

    @Test func invalidSettings_areRefusedWithTheRange() {
        #expect(throws: AudioProcessingError.self) {
            try AudioProcessor(
                settings: AudioProcessingSettings(highPassHertz: 1000, noiseSuppressionDecibels: 0, gainDecibels: 0), sampleRate: 48_000, channels: 2)
        }
    }
}
