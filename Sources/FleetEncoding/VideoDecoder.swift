import CAVCodec
import FleetCore
import Glibc

/// Decodes a camera's packets back into pictures (a still at an instant only an encoded
/// pre-roll holds: stills.md, "From the past"), through libavcodec, and repacks a picture into
/// the camera's own pixel format, so that what comes out can go wherever a captured frame goes.
/// 8-bit pictures only. Not thread-safe: one thread owns it while it decodes.
public final class VideoDecoder {
    /// A decoded picture while `decode`'s `deliver` runs: its planes are the decoder's until it returns.
    public struct Picture {
        /// The number given to the packet it came from.
        public let pts: Int64
        public let width: Int
        public let height: Int
        fileprivate let frame: UnsafeMutablePointer<AVFrame>
    }

    public let codec: VideoCodec
    private let context: UnsafeMutablePointer<AVCodecContext>
    private let packet: UnsafeMutablePointer<AVPacket>
    private let decoded: UnsafeMutablePointer<AVFrame>

    /// `codecConfig`: the stream's configuration (`EncodedPacket.codec_config`, Matroska's
    /// CodecPrivate); the picture's size, which FFV1's decoder needs before its first packet.
    public init(codec: VideoCodec, codecConfig: [UInt8], width: Int, height: Int) throws(EncodingError) {
        self.codec = codec
        let id: AVCodecID
        switch codec {
        case .h264: id = AV_CODEC_ID_H264
        case .hevc: id = AV_CODEC_ID_HEVC
        case .ffv1: id = AV_CODEC_ID_FFV1
        case .raw: throw .decoderMissing(codec: codec)
        }
        guard let decoder = avcodec_find_decoder(id) else { throw .decoderMissing(codec: codec) }
        guard let context = avcodec_alloc_context3(decoder) else {
            throw .ffmpeg(doing: "cannot allocate a decoder", encoder: codec.rawValue, code: capfleet_codec_averror(ENOMEM))
        }
        var owned: UnsafeMutablePointer<AVCodecContext>? = context
        if !codecConfig.isEmpty {
            let size = codecConfig.count
            guard let extradata = av_mallocz(size + Int(AV_INPUT_BUFFER_PADDING_SIZE))?.assumingMemoryBound(to: UInt8.self) else {
                avcodec_free_context(&owned)
                throw .ffmpeg(doing: "cannot allocate the decoder's configuration", encoder: codec.rawValue, code: capfleet_codec_averror(ENOMEM))
            }
            codecConfig.withUnsafeBufferPointer { extradata.update(from: $0.baseAddress!, count: size) }
            context.pointee.extradata = extradata
            context.pointee.extradata_size = Int32(size)
        }
        context.pointee.width = Int32(width)
        context.pointee.height = Int32(height)
        // One thread: a still decodes a second of frames at most, and must not take the host's cores.
        context.pointee.thread_count = 1
        let opened = avcodec_open2(context, decoder, nil)
        guard opened >= 0, let packet = av_packet_alloc(), let decoded = av_frame_alloc() else {
            avcodec_free_context(&owned)
            throw .ffmpeg(doing: "cannot open the decoder", encoder: codec.rawValue, code: opened < 0 ? opened : capfleet_codec_averror(ENOMEM))
        }
        self.context = context
        self.packet = packet
        self.decoded = decoded
    }

    deinit {
        var context: UnsafeMutablePointer<AVCodecContext>? = self.context
        avcodec_free_context(&context)
        var packet: UnsafeMutablePointer<AVPacket>? = self.packet
        av_packet_free(&packet)
        var decoded: UnsafeMutablePointer<AVFrame>? = self.decoded
        av_frame_free(&decoded)
    }

    /// Decodes one packet numbered `pts`; pictures ready come to `deliver`.
    public func decode(_ bytes: UnsafeRawBufferPointer, pts: Int64, deliver: (Picture) throws(EncodingError) -> Void) throws(EncodingError) {
        var code = av_new_packet(packet, Int32(bytes.count))
        guard code >= 0 else { throw .ffmpeg(doing: "cannot allocate a packet", encoder: codec.rawValue, code: code) }
        if let base = bytes.baseAddress, let data = packet.pointee.data {
            data.update(from: base.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        }
        packet.pointee.pts = pts
        packet.pointee.dts = pts
        code = avcodec_send_packet(context, packet)
        av_packet_unref(packet)
        guard code >= 0 else { throw .ffmpeg(doing: "cannot decode a packet", encoder: codec.rawValue, code: code) }
        try receive(deliver)
    }

    /// Ends the stream: pictures still inside the decoder come to `deliver`.
    public func drain(deliver: (Picture) throws(EncodingError) -> Void) throws(EncodingError) {
        let code = avcodec_send_packet(context, nil)
        guard code >= 0 || code == CAPFLEET_CODEC_AVERROR_EOF else {
            throw .ffmpeg(doing: "cannot drain the decoder", encoder: codec.rawValue, code: code)
        }
        try receive(deliver)
    }

    private func receive(_ deliver: (Picture) throws(EncodingError) -> Void) throws(EncodingError) {
        while true {
            let code = avcodec_receive_frame(context, decoded)
            if code == capfleet_codec_averror(EAGAIN) || code == CAPFLEET_CODEC_AVERROR_EOF { return }
            guard code >= 0 else { throw .ffmpeg(doing: "cannot take a picture from the decoder", encoder: codec.rawValue, code: code) }
            defer { av_frame_unref(decoded) }
            let pts =
                decoded.pointee.best_effort_timestamp == CAPFLEET_CODEC_NOPTS_VALUE ? decoded.pointee.pts : decoded.pointee.best_effort_timestamp
            try deliver(Picture(pts: pts, width: Int(decoded.pointee.width), height: Int(decoded.pointee.height), frame: decoded))
        }
    }
}

extension VideoDecoder.Picture {
    /// Bytes a picture of this size takes in `pixelFormat` (a FourCC), or nil for one it is not repacked into.
    public static func frameBytes(_ pixelFormat: String, width: Int, height: Int) -> Int? {
        switch pixelFormat {
        case "NV12": width * height * 3 / 2
        case "YUYV", "UYVY": width * height * 2
        case "GREY": width * height
        default: nil
        }
    }

    /// The picture in the camera's `pixelFormat` (NV12, YUYV, UYVY or GREY, without padding),
    /// chroma taken from the nearest decoded sample where the two subsample differently.
    public func repack(into target: UnsafeMutableRawPointer, pixelFormat: String) throws(EncodingError) {
        let format = AVPixelFormat(rawValue: frame.pointee.format)
        guard let descriptor = av_pix_fmt_desc_get(format), Self.frameBytes(pixelFormat, width: width, height: height) != nil else {
            throw .cannotRepack(from: Self.name(format), to: pixelFormat)
        }
        let planar = descriptor.pointee.flags & UInt64(AV_PIX_FMT_FLAG_PLANAR) != 0
        let components = Int(descriptor.pointee.nb_components)
        // 8-bit planar YUV (or grey), which is what software decoders give these streams.
        guard descriptor.pointee.comp.0.depth == 8, planar || components == 1 else { throw .cannotRepack(from: Self.name(format), to: pixelFormat) }
        let shiftX = Int(descriptor.pointee.log2_chroma_w), shiftY = Int(descriptor.pointee.log2_chroma_h)
        let out = target.assumingMemoryBound(to: UInt8.self)
        let luma = frame.pointee.data.0!, lumaStride = Int(frame.pointee.linesize.0)
        let hasChroma = components >= 3
        let u = frame.pointee.data.1, v = frame.pointee.data.2
        let chromaStride = Int(frame.pointee.linesize.1)
        func chroma(_ plane: UnsafeMutablePointer<UInt8>?, _ x: Int, _ y: Int) -> UInt8 {
            guard hasChroma, let plane else { return 128 }
            return plane[(y >> shiftY) * chromaStride + (x >> shiftX)]
        }
        switch pixelFormat {
        case "GREY":
            for row in 0..<height { (out + row * width).update(from: luma + row * lumaStride, count: width) }
        case "NV12":
            for row in 0..<height { (out + row * width).update(from: luma + row * lumaStride, count: width) }
            let uv = out + width * height
            for row in 0..<(height / 2) {
                for column in 0..<(width / 2) {
                    uv[row * width + column * 2] = chroma(u, column * 2, row * 2)
                    uv[row * width + column * 2 + 1] = chroma(v, column * 2, row * 2)
                }
            }
        default:  // YUYV, UYVY
            let lumaFirst = pixelFormat == "YUYV"
            for row in 0..<height {
                let line = out + row * width * 2, source = luma + row * lumaStride
                for column in stride(from: 0, to: width - 1, by: 2) {
                    let cb = chroma(u, column, row), cr = chroma(v, column, row)
                    line[column * 2 + (lumaFirst ? 0 : 1)] = source[column]
                    line[column * 2 + (lumaFirst ? 1 : 0)] = cb
                    line[column * 2 + (lumaFirst ? 2 : 3)] = source[column + 1]
                    line[column * 2 + (lumaFirst ? 3 : 2)] = cr
                }
            }
        }
    }

    static func name(_ format: AVPixelFormat) -> String {
        av_get_pix_fmt_name(format).map { String(cString: $0) } ?? "pixel format \(format.rawValue)"
    }
}
