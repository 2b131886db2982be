import FleetCore
import Testing

/// Levels as a meter reads them, and the synthetic microphone's tone and clicks
/// (microphones.md, "Levels" and "The synthetic microphone").
@Suite struct AudioLevelTests {
    static let stereo = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16le)

    static func meter(_ samples: [Int16], channels: Int = 2, window: Int = 48_000) -> AudioLevelMeter {
        var meter = AudioLevelMeter(channels: channels, windowFrames: window)
        samples.withUnsafeBufferPointer { meter.add($0) }
        return meter
    }

    @Test func aSecondOfTheTone_readsMinus20Peak_andMinus23RMS_oneLevelPerChannel() {
        let tone = SyntheticTone(format: Self.stereo)
        var samples: [Int16] = []
        tone.render(into: &samples, frames: 48_000, index: 0, fleetNs: nil)
        let levels = Self.meter(samples).levels
        #expect(levels.count == 2)
        for level in levels {
            #expect(abs(level.peakDBFS - -20) < 0.1, "\(level)")
            #expect(abs(level.rmsDBFS - -23.01) < 0.1, "a sine's RMS is 3 dB below its peak: \(level)")
            #expect(level.clipped == 0)
        }
    }

    @Test func silenceReadsTheFloor_andFullScaleSamplesCountAsClipped() {
        let silent = Self.meter(Array(repeating: 0, count: 9600)).levels
        #expect(silent.allSatisfy { $0.peakDBFS == AudioLevelMeter.floorDBFS && $0.rmsDBFS == AudioLevelMeter.floorDBFS })
        var loud = Array(repeating: Int16(0), count: 200)
        loud[0] = .max
        loud[2] = .min
        loud[3] = .max
        let levels = Self.meter(loud).levels
        #expect(levels[0].clipped == 2 && levels[1].clipped == 1, "per channel, interleaved: \(levels)")
        #expect(abs(levels[0].peakDBFS) < 0.01)
    }

    @Test func aReading_isTheLastWholeWindow_notTheOneFilling() {
        var meter = AudioLevelMeter(channels: 1, windowFrames: 100)
        let loud = Array(repeating: Int16(16384), count: 100)
        loud.withUnsafeBufferPointer { meter.add($0) }
        let quiet = Array(repeating: Int16(0), count: 50)
        quiet.withUnsafeBufferPointer { meter.add($0) }
        #expect(abs(meter.levels[0].peakDBFS - -6.02) < 0.01, "half a window of silence changes nothing yet")
    }

    @Test func theClick_startsOnTheFleetSecond_atMinus1dBFS() {
        let tone = SyntheticTone(format: Self.stereo)
        // A 10 ms block starting 4 ms before a whole second: the click starts 192 frames in.
        let start: UInt64 = 1_795_000_000_000_000_000 - 4_000_000
        #expect(tone.clickFrame(inBlockAt: start, frames: 480) == 192)
        var samples: [Int16] = []
        tone.render(into: &samples, frames: 480, index: 1000, fleetNs: start)
        let left = stride(from: 0, to: samples.count, by: 2).map { Int(samples[$0]) }
        #expect(left[..<192].allSatisfy { abs($0) <= 3277 }, "the tone before the second")
        #expect(left[192...].prefix(96).allSatisfy { abs($0) > 29_000 }, "2 ms of click from the second on")
        #expect(left[(192 + 96)...].allSatisfy { abs($0) <= 3277 }, "the tone again after it")
        #expect(samples[384] == samples[385], "the same on both channels")
        #expect(tone.clickFrame(inBlockAt: start - 100_000_000, frames: 480) == nil, "no second within the block")
    }
}
