import CAVCodec
import FleetCore

/// A take's stabilisation (recordings.md, "Stabilisation"): libavfilter's `deshake` between the
/// camera's picture and the encoder. It finds the frame's shift against the one before and moves
/// the picture back (the edges mirrored), one frame out for each frame in, at once, converted to
/// the planes the encoder takes. It alters the pixels, so only an encoded take's packets pass
/// through it. Not thread-safe: the take's encoding thread owns it, as it owns the encoder.
final class VideoStabiliser {
    /// The planes it takes: what `deshake` works on.
    static let inputFormat = AV_PIX_FMT_YUV420P

    private var graph: UnsafeMutablePointer<AVFilterGraph>?
    private let source: UnsafeMutablePointer<AVFilterContext>
    private let sink: UnsafeMutablePointer<AVFilterContext>
    private var filtered: UnsafeMutablePointer<AVFrame>?
    /// Frames the encoder must make key frames, by their pts, until they come out.
    private var forcedKeys: Set<Int64> = []
    private let name: String

    init(
        _ stabilisation: VideoStabilisation, width: Int, height: Int, frameRate: AVRational, output: AVPixelFormat, threads: Int
    ) throws(EncodingError) {
        name = stabilisation.filterName
        capfleet_codec_quiet()
        guard let graph = avfilter_graph_alloc(), let filtered = av_frame_alloc() else {
            throw .ffmpeg(doing: "cannot allocate the stabilisation filter", encoder: stabilisation.filterName, code: capfleet_codec_averror(ENOMEM))
        }
        self.graph = graph
        self.filtered = filtered
        graph.pointee.nb_threads = Int32(max(threads, 1))
        func fail(_ doing: String, _ code: Int32) -> EncodingError {
            var freed: UnsafeMutablePointer<AVFilterGraph>? = graph
            avfilter_graph_free(&freed)
            var frame: UnsafeMutablePointer<AVFrame>? = filtered
            av_frame_free(&frame)
            return .ffmpeg(doing: doing, encoder: stabilisation.filterName, code: code)
        }
        func make(_ filter: String, _ label: String, _ arguments: String?) throws(EncodingError) -> UnsafeMutablePointer<AVFilterContext> {
            var context: UnsafeMutablePointer<AVFilterContext>?
            let code = avfilter_graph_create_filter(&context, avfilter_get_by_name(filter), label, arguments, nil, graph)
            guard code >= 0, let context else { throw fail("cannot make libavfilter's \(filter) (\(arguments ?? ""))", code < 0 ? code : -1) }
            return context
        }
        // The time base the encoder's: one tick a frame.
        let input =
            "video_size=\(width)x\(height):pix_fmt=\(Self.inputFormat.rawValue):time_base=\(frameRate.den)/\(frameRate.num):pixel_aspect=1/1"
        source = try make("buffer", "in", input)
        let stabiliser = try make(stabilisation.filterName, "stabilise", stabilisation.filterArguments)
        let converter = try make("format", "planes", "pix_fmts=\(String(cString: av_get_pix_fmt_name(output)))")
        sink = try make("buffersink", "out", nil)
        for (from, to) in [(source, stabiliser), (stabiliser, converter), (converter, sink)] {
            let code = avfilter_link(from, 0, to, 0)
            guard code >= 0 else { throw fail("cannot link the stabilisation filter", code) }
        }
        let configured = avfilter_graph_config(graph, nil)
        guard configured >= 0 else { throw fail("cannot set up \(stabilisation.filterName) for \(width)x\(height)", configured) }
    }

    deinit {
        avfilter_graph_free(&graph)
        av_frame_free(&filtered)
    }

    /// Gives `picture` (`inputFormat`, its pts the frame's number; nil: the stream ends) to the
    /// filter and each stabilised frame it has ready to `deliver`, with the pts it went in with
    /// and made a key frame where the picture asked for one. The picture stays the caller's.
    func filter(
        _ picture: UnsafeMutablePointer<AVFrame>?, deliver: (UnsafeMutablePointer<AVFrame>) throws(EncodingError) -> Void
    ) throws(EncodingError) {
        if let picture, picture.pointee.pict_type == AV_PICTURE_TYPE_I { forcedKeys.insert(picture.pointee.pts) }
        var code = av_buffersrc_add_frame_flags(source, picture, picture == nil ? 0 : CAPFLEET_BUFFERSRC_KEEP_REF)
        guard code >= 0 else { throw .ffmpeg(doing: "cannot give a frame to \(name)", encoder: name, code: code) }
        guard let filtered else { return }
        while true {
            code = av_buffersink_get_frame(sink, filtered)
            if code == capfleet_codec_averror(EAGAIN) || code == CAPFLEET_CODEC_AVERROR_EOF { return }
            guard code >= 0 else { throw .ffmpeg(doing: "cannot take a frame from \(name)", encoder: name, code: code) }
            defer { av_frame_unref(filtered) }
            filtered.pointee.pict_type = forcedKeys.remove(filtered.pointee.pts) != nil ? AV_PICTURE_TYPE_I : AV_PICTURE_TYPE_NONE
            try deliver(filtered)
        }
    }
}

extension VideoStabilisation {
    /// libavfilter's filter that does it.
    var filterName: String {
        switch self {
        case .off, .deshake: "deshake"
        }
    }

    /// Its arguments: a search of ±16 pixels each way (deshake's default; it takes multiples of
    /// 16), the edges the shift uncovers mirrored from the picture.
    var filterArguments: String {
        switch self {
        case .off, .deshake: "rx=16:ry=16:edge=mirror"
        }
    }
}
