import FleetCore
import Foundation

/// One microphone's processing chain (microphones.md, "Processing"): high-pass, noise
/// suppression, gain, in place on interleaved 16-bit blocks of any length. Owned by the
/// microphone's thread.
///
/// Noise suppression works on whole 10 ms frames, so it re-frames the stream: samples wait
/// until a frame is whole, and what comes out lags what went in by a fixed `delayFrames` (one
/// frame of re-framing, one of speexdsp's overlap). The microphone takes that delay out of
/// the blocks' times, so sound stays on the picture's timebase with processing on.
public final class AudioProcessor {
    public let settings: AudioProcessingSettings
    public let sampleRate: Int
    public let channels: Int
    /// How far the output lags the input, in sample frames (0 without noise suppression).
    public let delayFrames: Int
    private var highPass: HighPassFilter?
    private let suppressors: [SpeexNoiseSuppressor]
    private let gain: Double?
    /// Noise suppression's frame, and the samples waiting for one to be whole (interleaved).
    private let frameSize: Int
    private var waiting: [Int16] = []
    /// Denoised samples not yet handed back (interleaved), read from `readyStart`.
    private var ready: [Int16] = []
    private var readyStart = 0
    private var channelFrame: [Int16]

    public init(settings: AudioProcessingSettings, sampleRate: Int, channels: Int) throws(AudioProcessingError) {
        if let problem = settings.problem(sampleRate: sampleRate) { throw .invalid(problem) }
        self.settings = settings
        self.sampleRate = sampleRate
        self.channels = max(channels, 1)
        highPass = settings.highPassHertz != 0 ? HighPassFilter(cornerHertz: settings.highPassHertz, sampleRate: sampleRate, channels: channels) : nil
        gain = settings.gainDecibels != 0 ? pow(10, settings.gainDecibels / 20) : nil
        frameSize = max(sampleRate / 100, 1)
        channelFrame = Array(repeating: 0, count: frameSize)
        if settings.noiseSuppressionDecibels != 0 {
            var made: [SpeexNoiseSuppressor] = []
            for _ in 0..<self.channels {
                made.append(
                    try SpeexNoiseSuppressor(frameSize: frameSize, sampleRate: sampleRate, suppressDecibels: settings.noiseSuppressionDecibels))
            }
            suppressors = made
            delayFrames = 2 * frameSize
            // The re-framing's lag: the first frame out is silence.
            ready = Array(repeating: 0, count: frameSize * self.channels)
        } else {
            suppressors = []
            delayFrames = 0
        }
    }

    /// Processes the first `frames` frames of `samples` in place.
    public func process(_ samples: inout [Int16], frames: Int) {
        let count = min(frames * channels, samples.count)
        guard count > 0 else { return }
        samples.withUnsafeMutableBufferPointer { buffer in
            let block = UnsafeMutableBufferPointer(rebasing: buffer[0..<count])
            highPass?.process(block, frames: count / channels)
            if !suppressors.isEmpty { suppress(block) }
            if let gain {
                for index in 0..<count { block[index] = HighPassFilter.clip(Double(block[index]) * gain) }
            }
        }
    }

    /// Puts the block into the re-framer and takes as many samples out, a fixed lag behind.
    private func suppress(_ block: UnsafeMutableBufferPointer<Int16>) {
        waiting.append(contentsOf: block)
        let whole = frameSize * channels
        var start = 0
        while waiting.count - start >= whole {
            for channel in 0..<channels {
                for index in 0..<frameSize { channelFrame[index] = waiting[start + index * channels + channel] }
                channelFrame.withUnsafeMutableBufferPointer { suppressors[channel].run($0.baseAddress!) }
                for index in 0..<frameSize { waiting[start + index * channels + channel] = channelFrame[index] }
            }
            ready.append(contentsOf: waiting[start..<(start + whole)])
            start += whole
        }
        if start > 0 { waiting.removeFirst(start) }
        // The lag keeps at least a block's worth ready: one whole frame was there from the start.
        let taken = min(block.count, ready.count - readyStart)
        for index in 0..<taken { block[index] = ready[readyStart + index] }
        readyStart += taken
        if readyStart > 4 * whole {
            ready.removeFirst(readyStart)
            readyStart = 0
        }
    }
}
