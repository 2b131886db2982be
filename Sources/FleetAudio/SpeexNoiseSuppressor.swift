import CSpeexDSP

/// speexdsp's preprocessor as a noise suppressor for one channel: denoising only (no gain
/// control, no dereverberation, no voice detection), over fixed frames of `frameSize` samples.
/// Its output lags its input by one frame (its overlap), which `AudioProcessor` accounts for.
final class SpeexNoiseSuppressor {
    let frameSize: Int
    private let state: OpaquePointer

    init(frameSize: Int, sampleRate: Int, suppressDecibels: Double) throws(AudioProcessingError) {
        guard let state = speex_preprocess_state_init(Int32(frameSize), Int32(sampleRate)) else {
            throw .suppressorUnavailable(sampleRate: sampleRate, frameSize: frameSize)
        }
        self.frameSize = frameSize
        self.state = state
        var on: Int32 = 1
        var off: Int32 = 0
        // speexdsp takes the most it may attenuate noise as a negative dB figure. Voice
        // detection is off by default and left alone: setting it prints a warning to stderr.
        var suppress = Int32(-suppressDecibels.rounded())
        speex_preprocess_ctl(state, SPEEX_PREPROCESS_SET_DENOISE, &on)
        speex_preprocess_ctl(state, SPEEX_PREPROCESS_SET_NOISE_SUPPRESS, &suppress)
        speex_preprocess_ctl(state, SPEEX_PREPROCESS_SET_AGC, &off)
        speex_preprocess_ctl(state, SPEEX_PREPROCESS_SET_DEREVERB, &off)
    }

    deinit { speex_preprocess_state_destroy(state) }

    /// Denoises one frame of `frameSize` samples in place.
    func run(_ frame: UnsafeMutablePointer<Int16>) {
        _ = speex_preprocess_run(state, frame)
    }
}
