import CAVCodec
import FleetCore
import Glibc

/// One camera's encoder for a take, through libavcodec: raw frames in (YUYV, UYVY, NV12,
/// GREY), packets out, each with the number of the frame it encodes and whether a decoder
/// can start there. No B-frames, so packets come out in the order frames went in, and every
/// whole packet after a key frame decodes (what crash repair counts on). The decoder's
/// configuration is in `codecConfig` from the start (global headers), for the Matroska
/// track's CodecPrivate. A take that asks for stabilisation has each picture steadied first
/// (`VideoStabiliser`). Not thread-safe: the take's encoding thread owns it.
public final class VideoEncoder {
    /// The camera frames it takes.
    public struct Source: Sendable, Equatable {
        public var pixelFormat: String
        public var width: Int
        public var height: Int
        /// Bytes from one row of the first plane to the next; 0: packed without padding.
        public var bytesPerLine: Int
        public var frameRate: Double

        public init(pixelFormat: String, width: Int, height: Int, bytesPerLine: Int = 0, frameRate: Double) {
            self.pixelFormat = pixelFormat
            self.width = width
            self.height = height
            self.bytesPerLine = bytesPerLine
            self.frameRate = frameRate
        }
    }

    /// A packet while `encode`'s `deliver` runs: its bytes are the encoder's until it returns.
    public struct Packet {
        public var bytes: UnsafeRawBufferPointer
        /// The number `encode` was given for the frame it holds.
        public var frameIndex: Int64
        public var isKeyFrame: Bool
    }

    public let choice: EncoderChoice
    public let source: Source
    public let encoding: TakeEncoding
    /// What a decoder needs before the first packet (FFV1's configuration record, H.264's
    /// SPS and PPS): Matroska's CodecPrivate.
    public let codecConfig: [UInt8]
    private let context: UnsafeMutablePointer<AVCodecContext>
    private let picture: UnsafeMutablePointer<AVFrame>
    private let packet: UnsafeMutablePointer<AVPacket>
    private let layout: capfleet_source_layout
    private let stride: Int
    private let frameBytes: Int
    private var hardwareDevice: UnsafeMutablePointer<AVBufferRef>?
    private let stabiliser: VideoStabiliser?
    private var drained = false

    public init(choice: EncoderChoice, encoding: TakeEncoding, source: Source, threads: Int, preset: String) throws(EncodingError) {
        self.choice = choice
        self.source = source
        self.encoding = encoding
        let codec = choice.codec
        guard let (layout, stride, frameBytes) = Self.sourceLayout(source) else {
            throw .unsupportedSource(pixelFormat: source.pixelFormat, codec: codec)
        }
        guard source.width > 0, source.height > 0, source.width % 2 == 0, source.height % 2 == 0 else {
            throw .unsupportedSize(width: source.width, height: source.height, codec: codec)
        }
        if encoding.stabilisation != .off, !codec.isLossy {
            throw .unsupportedStabilisation(codec: codec)
        }
        self.layout = layout
        self.stride = stride
        self.frameBytes = frameBytes
        capfleet_codec_quiet()
        guard let encoder = avcodec_find_encoder_by_name(choice.name) else { throw .encoderMissing(name: choice.name, codec: codec) }
        guard let context = avcodec_alloc_context3(encoder) else {
            throw .ffmpeg(doing: "cannot allocate an encoder", encoder: choice.name, code: capfleet_codec_averror(ENOMEM))
        }
        var pictureFormat = Self.pictureFormat(for: choice, source: layout)
        let rate = av_d2q(source.frameRate > 0 ? source.frameRate : 30, 1001 * 1000)
        context.pointee.width = Int32(source.width)
        context.pointee.height = Int32(source.height)
        context.pointee.framerate = rate
        context.pointee.time_base = AVRational(num: rate.den, den: rate.num)
        context.pointee.gop_size = Int32(encoding.gopFrames(frameRate: source.frameRate))
        context.pointee.max_b_frames = 0
        context.pointee.thread_count = Int32(max(threads, 1))
        context.pointee.flags |= Int32(CAPFLEET_CODEC_FLAG_GLOBAL_HEADER)
        var options: OpaquePointer?
        Self.configure(context, choice: choice, encoding: encoding, threads: max(threads, 1), preset: preset, options: &options)
        if case let .vaapi(device) = choice.kind {
            context.pointee.pix_fmt = AV_PIX_FMT_VAAPI
            var hardware: UnsafeMutablePointer<AVBufferRef>?
            let code = capfleet_vaapi_prepare(context, device, &hardware)
            guard code >= 0 else {
                var freed: UnsafeMutablePointer<AVCodecContext>? = context
                avcodec_free_context(&freed)
                av_dict_free(&options)
                throw .ffmpeg(doing: "cannot set up VA-API on \(device)", encoder: choice.name, code: code)
            }
            hardwareDevice = hardware
            pictureFormat = AV_PIX_FMT_NV12
        } else {
            context.pointee.pix_fmt = pictureFormat
        }
        let opened = avcodec_open2(context, encoder, &options)
        av_dict_free(&options)
        guard opened >= 0, let picture = av_frame_alloc(), let packet = av_packet_alloc() else {
            var freed: UnsafeMutablePointer<AVCodecContext>? = context
            avcodec_free_context(&freed)
            av_buffer_unref(&hardwareDevice)
            throw .ffmpeg(
                doing: "cannot open the encoder for \(source.width)x\(source.height) \(source.pixelFormat)", encoder: choice.name,
                code: opened < 0 ? opened : capfleet_codec_averror(ENOMEM))
        }
        self.context = context
        self.picture = picture
        self.packet = packet
        // Stabilised: the camera's picture goes into the filter's planes, and the filter gives
        // the encoder's (what the camera's would have been filled into).
        if encoding.stabilisation != .off {
            do {
                stabiliser = try VideoStabiliser(
                    encoding.stabilisation, width: source.width, height: source.height, frameRate: rate, output: pictureFormat,
                    threads: threads)
            } catch {
                var freedPicture: UnsafeMutablePointer<AVFrame>? = picture
                av_frame_free(&freedPicture)
                var freedPacket: UnsafeMutablePointer<AVPacket>? = packet
                av_packet_free(&freedPacket)
                var freed: UnsafeMutablePointer<AVCodecContext>? = context
                avcodec_free_context(&freed)
                av_buffer_unref(&hardwareDevice)
                throw error
            }
            pictureFormat = VideoStabiliser.inputFormat
        } else {
            stabiliser = nil
        }
        picture.pointee.format = pictureFormat.rawValue
        picture.pointee.width = Int32(source.width)
        picture.pointee.height = Int32(source.height)
        codecConfig = context.pointee.extradata.map { Array(UnsafeBufferPointer(start: $0, count: Int(context.pointee.extradata_size))) } ?? []
        let allocated = av_frame_get_buffer(picture, 0)
        guard allocated >= 0 else { throw .ffmpeg(doing: "cannot allocate a picture", encoder: choice.name, code: allocated) }
    }

    deinit {
        var context: UnsafeMutablePointer<AVCodecContext>? = self.context
        avcodec_free_context(&context)
        var picture: UnsafeMutablePointer<AVFrame>? = self.picture
        av_frame_free(&picture)
        var packet: UnsafeMutablePointer<AVPacket>? = self.packet
        av_packet_free(&packet)
        av_buffer_unref(&hardwareDevice)
    }

    /// Bytes a frame of `source` has.
    public var expectedFrameBytes: Int { frameBytes }

    /// Encodes one frame numbered `frameIndex` (rising by one per frame given); `forceKey`
    /// makes it a key frame (a new segment starts there). Packets ready come to `deliver`.
    public func encode(
        _ pixels: UnsafeRawPointer, count: Int, frameIndex: Int64, forceKey: Bool,
        deliver: (Packet) -> Void
    ) throws(EncodingError) {
        guard count >= frameBytes else { throw .shortFrame(expected: frameBytes, got: count) }
        var code = av_frame_make_writable(picture)
        guard code >= 0 else { throw .ffmpeg(doing: "cannot reuse the picture", encoder: choice.name, code: code) }
        code = capfleet_fill_frame(
            picture, pixels.assumingMemoryBound(to: UInt8.self), layout, Int32(source.width), Int32(source.height), Int32(stride))
        guard code >= 0 else { throw .ffmpeg(doing: "cannot repack \(source.pixelFormat)", encoder: choice.name, code: code) }
        picture.pointee.pts = frameIndex
        picture.pointee.pict_type = forceKey ? AV_PICTURE_TYPE_I : AV_PICTURE_TYPE_NONE
        if let stabiliser {
            try stabiliser.filter(picture) { steadied throws(EncodingError) in try encodePicture(steadied, deliver: deliver) }
        } else {
            try encodePicture(picture, deliver: deliver)
        }
    }

    /// One picture in the encoder's planes to the encoder (uploaded first for VA-API).
    private func encodePicture(_ picture: UnsafeMutablePointer<AVFrame>, deliver: (Packet) -> Void) throws(EncodingError) {
        if hardwareDevice != nil {
            // VA-API encodes from its own surfaces: the picture is uploaded into one.
            var allocated = av_frame_alloc()
            defer { av_frame_free(&allocated) }
            guard let uploaded = allocated else {
                throw .ffmpeg(doing: "cannot allocate a hardware picture", encoder: choice.name, code: capfleet_codec_averror(ENOMEM))
            }
            let code = capfleet_hw_upload(context, picture, uploaded)
            guard code >= 0 else { throw .ffmpeg(doing: "cannot upload a picture to the hardware encoder", encoder: choice.name, code: code) }
            uploaded.pointee.pict_type = picture.pointee.pict_type
            uploaded.pointee.pts = picture.pointee.pts
            try send(uploaded, deliver: deliver)
        } else {
            try send(picture, deliver: deliver)
        }
    }

    /// Ends the stream: packets still inside the encoder come to `deliver`. Once only.
    public func drain(deliver: (Packet) -> Void) throws(EncodingError) {
        guard !drained else { return }
        drained = true
        if let stabiliser {
            try stabiliser.filter(nil) { steadied throws(EncodingError) in try encodePicture(steadied, deliver: deliver) }
        }
        try send(nil, deliver: deliver)
    }

    private func send(_ frame: UnsafeMutablePointer<AVFrame>?, deliver: (Packet) -> Void) throws(EncodingError) {
        var code = avcodec_send_frame(context, frame)
        guard code >= 0 else { throw .ffmpeg(doing: "cannot encode a frame", encoder: choice.name, code: code) }
        while true {
            code = avcodec_receive_packet(context, packet)
            if code == capfleet_codec_averror(EAGAIN) || code == CAPFLEET_CODEC_AVERROR_EOF { return }
            guard code >= 0 else { throw .ffmpeg(doing: "cannot take a packet from the encoder", encoder: choice.name, code: code) }
            defer { av_packet_unref(packet) }
            guard let data = packet.pointee.data else { continue }
            deliver(
                Packet(
                    bytes: UnsafeRawBufferPointer(start: data, count: Int(packet.pointee.size)), frameIndex: packet.pointee.pts,
                    isKeyFrame: packet.pointee.flags & AV_PKT_FLAG_KEY != 0))
        }
    }

    /// Frames x264 and x265 look ahead (their presets' own go up to 60).
    static let lookahead = 10

    /// How the camera's bytes are laid out, the first plane's row stride, and a frame's size.
    static func sourceLayout(_ source: Source) -> (capfleet_source_layout, Int, Int)? {
        let width = source.width, height = source.height
        switch source.pixelFormat {
        case "YUYV", "UYVY":
            let stride = max(source.bytesPerLine, width * 2)
            return (source.pixelFormat == "YUYV" ? CAPFLEET_SOURCE_YUYV : CAPFLEET_SOURCE_UYVY, stride, stride * height)
        case "NV12":
            let stride = max(source.bytesPerLine, width)
            return (CAPFLEET_SOURCE_NV12, stride, stride * height * 3 / 2)
        case "GREY":
            let stride = max(source.bytesPerLine, width)
            return (CAPFLEET_SOURCE_GREY, stride, stride * height)
        default:
            return nil
        }
    }

    /// The planes the encoder takes: FFV1 keeps every sample (4:2:2 stays 4:2:2, grey stays
    /// grey); the lossy codecs take 4:2:0 as players and hardware decoders expect it.
    static func pictureFormat(for choice: EncoderChoice, source: capfleet_source_layout) -> AVPixelFormat {
        switch choice.codec {
        case .ffv1:
            switch source {
            case CAPFLEET_SOURCE_YUYV, CAPFLEET_SOURCE_UYVY: return AV_PIX_FMT_YUV422P
            case CAPFLEET_SOURCE_GREY: return AV_PIX_FMT_GRAY8
            default: return AV_PIX_FMT_YUV420P
            }
        case .h264 where choice.kind == .software:
            return AV_PIX_FMT_NV12  // x264's own layout: no conversion inside it
        default:
            return AV_PIX_FMT_YUV420P
        }
    }

    private static func configure(
        _ context: UnsafeMutablePointer<AVCodecContext>, choice: EncoderChoice, encoding: TakeEncoding,
        threads: Int, preset: String, options: inout OpaquePointer?
    ) {
        let quality = encoding.quality ?? TakeEncoding.defaultQuality
        func setBitrate(_ bitsPerSecond: Int) {
            context.pointee.bit_rate = Int64(bitsPerSecond)
            context.pointee.rc_max_rate = Int64(bitsPerSecond) * 3 / 2
            context.pointee.rc_buffer_size = Int32(clamping: bitsPerSecond * 2)
        }
        switch (choice.codec, choice.kind) {
        case (.ffv1, _):
            context.pointee.level = 3
            context.pointee.thread_type = CAPFLEET_THREAD_SLICE
            // Version 3 codes slices independently: one per thread at least, and more slices
            // than that cost little size.
            av_dict_set(&options, "slices", threads <= 4 ? "4" : threads <= 12 ? "12" : "24", 0)
            av_dict_set(&options, "slicecrc", "1", 0)
            // Golomb-Rice: half the CPU of the range coder for camera footage, whose noise
            // neither compresses much better (measured: within 1 % of the size).
            av_dict_set(&options, "coder", "rice", 0)
            av_dict_set(&options, "context", "0", 0)
        case (.h264, .software):
            av_dict_set(&options, "preset", preset, 0)
            av_dict_set(&options, "forced-idr", "1", 0)
            // A third of a second of look-ahead at most: what an encoder holds bounds the
            // memory, the latency and how long a take's end waits for its last packets.
            av_dict_set(&options, "rc-lookahead", "\(Self.lookahead)", 0)
            if encoding.bitrate > 0 { setBitrate(encoding.bitrate) } else { av_dict_set(&options, "crf", "\(quality)", 0) }
            context.pointee.keyint_min = context.pointee.gop_size
        case (.hevc, .software):
            av_dict_set(&options, "preset", preset, 0)
            av_dict_set(&options, "forced-idr", "1", 0)
            if encoding.bitrate > 0 { setBitrate(encoding.bitrate) } else { av_dict_set(&options, "crf", "\(quality)", 0) }
            av_dict_set(
                &options, "x265-params",
                "bframes=0:pools=\(threads):log-level=error:min-keyint=\(context.pointee.gop_size):rc-lookahead=\(Self.lookahead)", 0)
        case (_, .vaapi):
            if encoding.bitrate > 0 {
                setBitrate(encoding.bitrate)
            } else {
                av_dict_set(&options, "qp", "\(quality)", 0)
            }
        case (_, .memoryToMemory):
            // Memory-to-memory encoders take a bit rate, not a quality: about 0.1 bit per pixel
            // at the default quality, halved for every 6 steps of quality past it (as CRF goes).
            let pixelsPerSecond = Double(context.pointee.width * context.pointee.height) * av_q2d(context.pointee.framerate)
            let bits =
                encoding.bitrate > 0
                ? Double(encoding.bitrate)
                : pixelsPerSecond * 0.1 * exp2(Double(TakeEncoding.defaultQuality - quality) / 6)
            setBitrate(Int(bits))
        default:
            break
        }
    }
}
