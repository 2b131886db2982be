import CAVCodec
import FleetCore
import Glibc

/// One camera's encoder for a take, through libavcodec: raw frames in (YUYV, UYVY, NV12,
/// GREY, and the deeper Y10, Y12, Y16, P010, P016 and depth Z16), packets out, each with the number of the frame it encodes and whether a decoder
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
        /// Significant bits of each sample, and how they map to light where the camera says
        /// (frames.md, "Colour and depth"): the encoded stream's VUI and the track's Colour.
        public var bitDepth: Int
        public var colour: ColourDescription?

        public init(
            pixelFormat: String, width: Int, height: Int, bytesPerLine: Int = 0, frameRate: Double, bitDepth: Int = 8,
            colour: ColourDescription? = nil
        ) {
            self.pixelFormat = pixelFormat
            self.width = width
            self.height = height
            self.bytesPerLine = bytesPerLine
            self.frameRate = frameRate
            self.bitDepth = bitDepth
            self.colour = colour
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
    /// Words' formats: how far each word is shifted right into the encoder's samples.
    private let wordShift: Int
    /// Significant bits of each sample the stream codes (FFV1 the camera's, HEVC Main 10 ten,
    /// the 8-bit codecs eight): the track's BIT_DEPTH.
    public let codedBitDepth: Int
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
        let pixelFormat = PixelFormat(source.pixelFormat)
        if pixelFormat.isDepth || pixelFormat.bayer != nil, codec.isLossy { throw .depthNeedsLossless(codec: codec) }
        if encoding.stabilisation != .off, pixelFormat.hasWordSamples {
            throw .stabilisationNeedsEightBits(pixelFormat: source.pixelFormat)
        }
        let planes = Self.picture(for: choice, source: pixelFormat, layout: layout)
        wordShift = planes.shift
        // A 12-bit sensor's Y16 is coded in 16 bits, of which 12 are significant.
        codedBitDepth = planes.codedBits.map { min($0, max(source.bitDepth, 8)) } ?? 8
        self.layout = layout
        self.stride = stride
        self.frameBytes = frameBytes
        capfleet_codec_quiet()
        guard let encoder = avcodec_find_encoder_by_name(choice.name) else { throw .encoderMissing(name: choice.name, codec: codec) }
        guard let context = avcodec_alloc_context3(encoder) else {
            throw .ffmpeg(doing: "cannot allocate an encoder", encoder: choice.name, code: capfleet_codec_averror(ENOMEM))
        }
        var pictureFormat = planes.format
        let rate = av_d2q(source.frameRate > 0 ? source.frameRate : 30, 1001 * 1000)
        context.pointee.width = Int32(source.width)
        context.pointee.height = Int32(source.height)
        context.pointee.framerate = rate
        context.pointee.time_base = AVRational(num: rate.den, den: rate.num)
        context.pointee.gop_size = Int32(encoding.gopFrames(frameRate: source.frameRate))
        context.pointee.max_b_frames = 0
        context.pointee.thread_count = Int32(max(threads, 1))
        // FFV1 codes this many bits of each sample: all of the planes' (fewer would drop the
        // high bits of a Y16 word).
        if let bits = planes.codedBits { context.pointee.bits_per_raw_sample = Int32(bits) }
        if let colour = source.colour {
            // H.273 codes, FFmpeg's enums: x265 writes them in the stream's VUI.
            context.pointee.color_primaries = AVColorPrimaries(rawValue: UInt32(colour.primaries.h273Code))
            context.pointee.color_trc = AVColorTransferCharacteristic(rawValue: UInt32(colour.transfer.h273Code))
            context.pointee.colorspace = AVColorSpace(rawValue: UInt32(colour.matrix.h273Code))
            context.pointee.color_range = colour.range == .full ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG
        }
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
        let bytes = pixels.assumingMemoryBound(to: UInt8.self)
        if layout == CAPFLEET_SOURCE_GREY_WORDS || layout == CAPFLEET_SOURCE_P0XX {
            code = capfleet_fill_frame_words(
                picture, bytes, layout, Int32(source.width), Int32(source.height), Int32(stride), Int32(wordShift))
        } else {
            code = capfleet_fill_frame(picture, bytes, layout, Int32(source.width), Int32(source.height), Int32(stride))
        }
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
        case "GREY", "BA81", "GBRG", "GRBG", "RGGB":
            // A Bayer mosaic is one sample a pixel: FFV1 keeps it as grey, bit for bit.
            let stride = max(source.bytesPerLine, width)
            return (CAPFLEET_SOURCE_GREY, stride, stride * height)
        case "Y10", "Y12", "Y16", "Z16", "BG10", "GB10", "BA10", "RG10", "BG12", "GB12", "BA12", "RG12", "BYR2", "GB16", "GR16", "RG16":
            let stride = max(source.bytesPerLine, width * 2)
            return (CAPFLEET_SOURCE_GREY_WORDS, stride, stride * height)
        case "P010", "P016":
            let stride = max(source.bytesPerLine, width * 2)
            return (CAPFLEET_SOURCE_P0XX, stride, stride * height * 3 / 2)
        default:
            return nil
        }
    }

    /// The planes the encoder takes, the shift of a words' format into them, and the depth
    /// they code (nil: 8 bits). FFV1 keeps every sample (4:2:2 stays 4:2:2, grey stays grey,
    /// 10, 12 and 16 bits stay so); software HEVC takes anything deeper than 8 bits as Main 10
    /// (the sample's top ten bits, grey with neutral chroma: players and hardware decoders
    /// know 4:2:0 Main 10); the other lossy codecs take 8-bit 4:2:0, the top eight bits.
    static func picture(
        for choice: EncoderChoice, source: PixelFormat, layout: capfleet_source_layout
    ) -> (format: AVPixelFormat, shift: Int, codedBits: Int?) {
        // Where the sample's top bit is: Y10, Y12 keep theirs low; Y16, Z16 and P0xx fill the word.
        let topBits = source.greyWordBits ?? source.bayer.map(\.bits) ?? (source.semiPlanarWordBits != nil ? 16 : 8)
        let isWords = layout == CAPFLEET_SOURCE_GREY_WORDS || layout == CAPFLEET_SOURCE_P0XX
        switch choice.codec {
        case .ffv1 where isWords:
            // A Bayer mosaic of 10 or 12 bits is coded as grey of its depth.
            let coded = source.bayer.map { $0.bits == 10 ? "Y10" : $0.bits == 12 ? "Y12" : "Y16" } ?? source.fourCC
            switch coded {
            case "Y10": return (AV_PIX_FMT_GRAY10LE, 0, 10)
            case "Y12": return (AV_PIX_FMT_GRAY12LE, 0, 12)
            case "P010": return (AV_PIX_FMT_YUV420P10LE, 6, 10)  // P010's low six bits are padding
            case "P016": return (AV_PIX_FMT_YUV420P16LE, 0, 16)
            default: return (AV_PIX_FMT_GRAY16LE, 0, 16)
            }
        case .ffv1:
            switch layout {
            case CAPFLEET_SOURCE_YUYV, CAPFLEET_SOURCE_UYVY: return (AV_PIX_FMT_YUV422P, 0, nil)
            case CAPFLEET_SOURCE_GREY: return (AV_PIX_FMT_GRAY8, 0, nil)
            default: return (AV_PIX_FMT_YUV420P, 0, nil)
            }
        case .hevc where choice.kind == .software && isWords:
            return (AV_PIX_FMT_YUV420P10LE, topBits - 10, 10)
        case .h264 where choice.kind == .software:
            return (AV_PIX_FMT_NV12, isWords ? topBits - 8 : 0, nil)  // x264's own layout: no conversion inside it
        default:
            return (AV_PIX_FMT_YUV420P, isWords ? topBits - 8 : 0, nil)
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
