import CAlsa
import FleetCore
import Glibc

/// One ALSA capture device opened for capture in one format (microphones.md, "ALSA capture
/// devices" and "Capture times"): `hw:` directly, so nothing converts or resamples behind the
/// agent's back; 10 ms periods; the driver's timestamps on CLOCK_MONOTONIC. Blocking calls:
/// use it on one thread the caller owns.
public final class AlsaCapture {
    /// A block read: its samples as 16-bit (S32_LE is narrowed), when its first sample was
    /// captured, how that is known, and whether samples were lost just before it.
    public struct Block {
        public var frames: Int
        public var firstFrameMonotonicNs: UInt64
        public var timestampSource: TimestampSource
        /// An overrun (the agent read too late) or a driver restart came before this block:
        /// the stream has a gap here.
        public var afterGap: Bool
    }

    public enum TimestampSource: Sendable {
        /// The kernel's timestamp of the hardware pointer's last update.
        case driver
        /// The agent's clock when it read, less what was waiting: the driver gave no timestamp.
        case readTime
    }

    public let name: String
    public let format: AudioFormat
    public let periodFrames: Int
    private let pcm: OpaquePointer
    private var raw: [Int32] = []
    private var pendingGap = false
    /// Overruns and restarts since opening.
    public private(set) var overruns = 0

    public init(name: String, format: AudioFormat) throws(AlsaError) {
        capfleet_alsa_silence()
        var handle: OpaquePointer?
        // No automatic conversion: the device must give this format itself.
        let mode = CAPFLEET_SND_PCM_NO_AUTO_RESAMPLE | CAPFLEET_SND_PCM_NO_AUTO_CHANNELS | CAPFLEET_SND_PCM_NO_AUTO_FORMAT
        try alsaCheck(snd_pcm_open(&handle, name, SND_PCM_STREAM_CAPTURE, mode), "snd_pcm_open", device: name)
        guard let handle else { throw AlsaError(device: name, operation: "snd_pcm_open", code: -ENODEV) }
        do {
            periodFrames = try Self.configure(handle, name: name, format: format)
        } catch {
            snd_pcm_close(handle)
            throw error
        }
        self.name = name
        self.format = format
        pcm = handle
    }

    deinit { snd_pcm_close(pcm) }

    private static func configure(_ pcm: OpaquePointer, name: String, format: AudioFormat) throws(AlsaError) -> Int {
        var hw: OpaquePointer?
        try alsaCheck(snd_pcm_hw_params_malloc(&hw), "snd_pcm_hw_params_malloc", device: name)
        guard let hw else { throw AlsaError(device: name, operation: "snd_pcm_hw_params_malloc", code: -ENOMEM) }
        defer { snd_pcm_hw_params_free(hw) }
        try alsaCheck(snd_pcm_hw_params_any(pcm, hw), "snd_pcm_hw_params_any", device: name)
        try alsaCheck(snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED), "set_access", device: name)
        let sampleFormat = format.sampleFormat == .s32le ? SND_PCM_FORMAT_S32_LE : SND_PCM_FORMAT_S16_LE
        guard format.sampleFormat != .floatLE else { throw AlsaError(device: name, operation: "set_format FLOAT_LE", code: -EINVAL) }
        try alsaCheck(snd_pcm_hw_params_set_format(pcm, hw, sampleFormat), "set_format \(format.sampleFormat.rawValue)", device: name)
        try alsaCheck(snd_pcm_hw_params_set_channels(pcm, hw, UInt32(format.channels)), "set_channels \(format.channels)", device: name)
        try alsaCheck(snd_pcm_hw_params_set_rate(pcm, hw, UInt32(format.sampleRate), 0), "set_rate \(format.sampleRate)", device: name)
        // 10 ms periods in a buffer of about 200 ms: a late read is an overrun only after that.
        var period = snd_pcm_uframes_t(format.sampleRate / 100)
        var direction: Int32 = 0
        try alsaCheck(snd_pcm_hw_params_set_period_size_near(pcm, hw, &period, &direction), "set_period_size_near", device: name)
        var buffer = period * 20
        try alsaCheck(snd_pcm_hw_params_set_buffer_size_near(pcm, hw, &buffer), "set_buffer_size_near", device: name)
        try alsaCheck(snd_pcm_hw_params(pcm, hw), "snd_pcm_hw_params", device: name)

        var sw: OpaquePointer?
        try alsaCheck(snd_pcm_sw_params_malloc(&sw), "snd_pcm_sw_params_malloc", device: name)
        guard let sw else { throw AlsaError(device: name, operation: "snd_pcm_sw_params_malloc", code: -ENOMEM) }
        defer { snd_pcm_sw_params_free(sw) }
        try alsaCheck(snd_pcm_sw_params_current(pcm, sw), "snd_pcm_sw_params_current", device: name)
        try alsaCheck(snd_pcm_sw_params_set_avail_min(pcm, sw, period), "set_avail_min", device: name)
        // The driver stamps every hardware pointer update, on the clock fleet time is kept on.
        try alsaCheck(snd_pcm_sw_params_set_tstamp_mode(pcm, sw, SND_PCM_TSTAMP_ENABLE), "set_tstamp_mode", device: name)
        try alsaCheck(snd_pcm_sw_params_set_tstamp_type(pcm, sw, SND_PCM_TSTAMP_TYPE_MONOTONIC), "set_tstamp_type", device: name)
        try alsaCheck(snd_pcm_sw_params(pcm, sw), "snd_pcm_sw_params", device: name)
        try alsaCheck(snd_pcm_prepare(pcm), "snd_pcm_prepare", device: name)
        try alsaCheck(snd_pcm_start(pcm), "snd_pcm_start", device: name)
        return Int(period)
    }

    /// Waits up to `timeoutMilliseconds` for a period and reads what has arrived (at most
    /// `maxFrames`) into `samples`, interleaved 16-bit; nil when nothing came in time. An
    /// overrun is recovered from here and marks the next block `afterGap`; a device that is
    /// gone throws.
    public func read(into samples: inout [Int16], maxFrames: Int, timeoutMilliseconds: Int32) throws(AlsaError) -> Block? {
        let waited = snd_pcm_wait(pcm, timeoutMilliseconds)
        if waited < 0 {
            try recover(waited)
            return nil
        }
        if waited == 0 { return nil }
        var available: snd_pcm_uframes_t = 0
        var stamp = timespec()
        let stamped = snd_pcm_htimestamp(pcm, &available, &stamp)
        if stamped < 0 {
            try recover(stamped)
            return nil
        }
        let wanted = min(Int(available), maxFrames)
        guard wanted > 0 else { return nil }
        let channels = format.channels
        if samples.count < wanted * channels { samples = Array(repeating: 0, count: wanted * channels) }
        let read: Int
        if format.sampleFormat == .s32le {
            if raw.count < wanted * channels { raw = Array(repeating: 0, count: wanted * channels) }
            read = Int(raw.withUnsafeMutableBytes { snd_pcm_readi(pcm, $0.baseAddress, snd_pcm_uframes_t(wanted)) })
            if read > 0 {
                // The top 16 bits: what the meters and the live path carry.
                for index in 0..<(read * channels) { samples[index] = Int16(truncatingIfNeeded: raw[index] >> 16) }
            }
        } else {
            read = Int(samples.withUnsafeMutableBytes { snd_pcm_readi(pcm, $0.baseAddress, snd_pcm_uframes_t(wanted)) })
        }
        if read < 0 {
            try recover(Int32(read))
            return nil
        }
        let frameNs = 1e9 / Double(format.sampleRate)
        let stampNs = UInt64(stamp.tv_sec) &* 1_000_000_000 &+ UInt64(stamp.tv_nsec)
        // At the stamp, `available` frames were waiting, the oldest of them the first read now.
        let source: TimestampSource = stampNs > 0 ? .driver : .readTime
        let reference = stampNs > 0 ? stampNs : MonotonicTime.now()
        let back = UInt64((Double(available) * frameNs).rounded())
        let block = Block(
            frames: read, firstFrameMonotonicNs: reference > back ? reference - back : 0, timestampSource: source, afterGap: pendingGap)
        pendingGap = false
        return block
    }

    /// An overrun (EPIPE) or a suspend (ESTRPIPE): prepared and started again, the gap noted;
    /// anything else (the device is gone) is thrown.
    private func recover(_ code: Int32) throws(AlsaError) {
        guard code == -EPIPE || code == -ESTRPIPE || code == -EAGAIN else {
            throw AlsaError(device: name, operation: "capture", code: code)
        }
        if code == -EAGAIN { return }
        overruns += 1
        pendingGap = true
        try alsaCheck(snd_pcm_recover(pcm, code, 1), "snd_pcm_recover", device: name)
        try alsaCheck(snd_pcm_start(pcm), "snd_pcm_start", device: name)
    }
}
