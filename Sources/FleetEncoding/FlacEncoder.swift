import CAVCodec
import FleetCore

/// A microphone's encoder for a take (microphones.md, "In takes"): interleaved 16-bit blocks
/// of a fixed length in, one FLAC frame (lossless) out for each, at once: FLAC frames stand
/// alone, so every packet is a place a decoder can start and a crash loses no more than the
/// packets not yet written. STREAMINFO, the Matroska track's CodecPrivate, is in `codecConfig`
/// from the start. Not thread-safe: the microphone's thread owns it.
public final class FlacEncoder {
    public let format: AudioFormat
    /// Sample frames in every block (the last of a part may be shorter).
    public let blockFrames: Int
    public let codecConfig: [UInt8]
    public static let encoderName = "flac"
    private let context: UnsafeMutablePointer<AVCodecContext>
    private let frame: UnsafeMutablePointer<AVFrame>
    private let packet: UnsafeMutablePointer<AVPacket>

    public init(format: AudioFormat, blockFrames: Int) throws(EncodingError) {
        self.format = format
        self.blockFrames = blockFrames
        capfleet_codec_quiet()
        guard let encoder = avcodec_find_encoder_by_name(Self.encoderName) else { throw .encoderMissing(name: Self.encoderName, codec: .raw) }
        guard let context = avcodec_alloc_context3(encoder) else {
            throw .ffmpeg(doing: "cannot allocate an encoder", encoder: Self.encoderName, code: capfleet_codec_averror(ENOMEM))
        }
        var opened: UnsafeMutablePointer<AVCodecContext>? = context
        context.pointee.sample_rate = Int32(format.sampleRate)
        context.pointee.sample_fmt = AV_SAMPLE_FMT_S16
        av_channel_layout_default(&context.pointee.ch_layout, Int32(format.channels))
        context.pointee.time_base = AVRational(num: 1, den: Int32(format.sampleRate))
        context.pointee.frame_size = Int32(blockFrames)
        // Level 5 (the default): a third of the raw size for speech and music, in a few % of a core.
        let code = avcodec_open2(context, encoder, nil)
        guard code >= 0 else {
            avcodec_free_context(&opened)
            throw .ffmpeg(doing: "cannot open a \(format.label) FLAC encoder", encoder: Self.encoderName, code: code)
        }
        guard let frame = av_frame_alloc(), let packet = av_packet_alloc() else {
            avcodec_free_context(&opened)
            throw .ffmpeg(doing: "cannot allocate a frame", encoder: Self.encoderName, code: capfleet_codec_averror(ENOMEM))
        }
        self.context = context
        self.frame = frame
        self.packet = packet
        codecConfig =
            context.pointee.extradata.map { Array(UnsafeBufferPointer(start: $0, count: Int(context.pointee.extradata_size))) } ?? []
    }

    deinit {
        var context: UnsafeMutablePointer<AVCodecContext>? = self.context
        avcodec_free_context(&context)
        var frame: UnsafeMutablePointer<AVFrame>? = self.frame
        av_frame_free(&frame)
        var packet: UnsafeMutablePointer<AVPacket>? = self.packet
        av_packet_free(&packet)
    }

    /// Encodes `frames` sample frames of `samples` (interleaved) and hands the FLAC frame to
    /// `deliver`; its bytes are the encoder's until `deliver` returns.
    public func encode(_ samples: UnsafeBufferPointer<Int16>, frames: Int, deliver: (UnsafeRawBufferPointer) -> Void) throws(EncodingError) {
        guard frames > 0, frames <= blockFrames, samples.count >= frames * format.channels else {
            throw .shortFrame(expected: blockFrames * format.channels * 2, got: samples.count * 2)
        }
        frame.pointee.nb_samples = Int32(frames)
        frame.pointee.format = AV_SAMPLE_FMT_S16.rawValue
        frame.pointee.sample_rate = Int32(format.sampleRate)
        av_channel_layout_copy(&frame.pointee.ch_layout, &context.pointee.ch_layout)
        var code = av_frame_get_buffer(frame, 0)
        guard code >= 0 else { throw .ffmpeg(doing: "cannot allocate samples", encoder: Self.encoderName, code: code) }
        defer { av_frame_unref(frame) }
        frame.pointee.data.0?.withMemoryRebound(to: Int16.self, capacity: frames * format.channels) {
            $0.update(from: samples.baseAddress!, count: frames * format.channels)
        }
        code = avcodec_send_frame(context, frame)
        guard code >= 0 else { throw .ffmpeg(doing: "cannot encode a block", encoder: Self.encoderName, code: code) }
        while avcodec_receive_packet(context, packet) >= 0 {
            defer { av_packet_unref(packet) }
            deliver(UnsafeRawBufferPointer(start: packet.pointee.data, count: Int(packet.pointee.size)))
        }
    }
}
