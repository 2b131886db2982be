import CAVFormat
import FleetCore

/// What a segment's video track carries: the device's frames as they came, or the packets
/// the agent's encoder made of them (FFV1, H264, HEVC), never re-encoded here.
public struct RecordedVideoFormat: Sendable, Equatable {
    public var pixelFormat: PixelFormat
    public var width: Int
    public var height: Int
    /// Nominal frames per second (the file's default frame duration); 0 if unknown.
    public var frameRate: Double
    /// Encoded tracks: the decoder's configuration (Matroska's CodecPrivate). A new one (the
    /// encoder started again) starts a new segment.
    public var codecConfig: [UInt8]
    /// Encoded tracks: the encoder that made them (ffv1, libx264, …) and the camera's format.
    public var encoder: String
    public var sourcePixelFormat: String
    /// A microphone's part (microphones.md, "In takes"): the sound's format; the track is then
    /// FLAC (`pixelFormat` "FLAC", no size), `frameRate` its packets a second.
    public var audio: AudioFormat?
    /// Encoded tracks: the picture was steadied before it was encoded (recordings.md,
    /// "Stabilisation"); the track's STABILISATION tag says how.
    public var stabilisation: VideoStabilisation
    /// Significant bits of each sample as stored (a Main 10 track: 10), the colour description
    /// the source declared, and a depth track's metres per unit (frames.md, "Colour and
    /// depth"): the track's Colour element and its BIT_DEPTH and DEPTH_UNIT_METRES tags.
    public var bitDepth: Int
    public var colour: ColourDescription?
    public var depthUnitMetres: Double?

    public init(
        pixelFormat: PixelFormat, width: Int, height: Int, frameRate: Double, codecConfig: [UInt8] = [], encoder: String = "",
        sourcePixelFormat: String = "", audio: AudioFormat? = nil, stabilisation: VideoStabilisation = .off, bitDepth: Int = 8,
        colour: ColourDescription? = nil, depthUnitMetres: Double? = nil
    ) {
        self.stabilisation = stabilisation
        self.bitDepth = bitDepth
        self.colour = colour
        self.depthUnitMetres = depthUnitMetres
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
        self.frameRate = frameRate
        self.codecConfig = codecConfig
        self.encoder = encoder
        self.sourcePixelFormat = sourcePixelFormat
        self.audio = audio
    }

    /// Packets of a codec with frames that depend on earlier ones: a segment must begin at a
    /// key frame.
    public var needsKeyFrameToStart: Bool { ["H264", "HEVC", "FFV1"].contains(pixelFormat.fourCC) }

    /// The FourCC a microphone's FLAC track is indexed under.
    public static let flacFourCC = "FLAC"
}

/// Which subtitle track of a segment a timed-metadata entry goes on. Each track's entries go
/// forward in time; the tracks need not keep pace with each other or with the video, so a
/// detection that arrives after later frames still sits at its own frame's time.
public enum MetadataTrack: Sendable, Equatable {
    /// Sequence markers, events, operators' notes: written as they happen.
    case notes
    /// Detected codes and faces (detection.md), each at its frame's time.
    case detections
    /// Sensor streams' readings (sensors.md, "In takes"): a batch at its first reading's time.
    case sensors
}

/// One Matroska file for one device's segment, written with libavformat: the frames as they
/// came (raw YUYV/NV12/grey as uncompressed video, MJPEG and H.264 as they are) or as the
/// agent encoded them (FFV1, H.264, HEVC, with their configuration as CodecPrivate) and three
/// subtitle tracks of JSON lines carrying the timed metadata (notes, detections, then sensor
/// readings), so the file stands alone.
///
/// Timestamps are nanoseconds of fleet time since the take started; the file holds them in
/// Matroska's milliseconds (the index keeps the nanoseconds). Not thread-safe: one writer
/// thread owns it, since every call is blocking disk I/O.
public final class MatroskaSegmentWriter {
    public struct Summary: Sendable, Equatable {
        public var path: String
        public var frames: Int
        /// Video payload bytes written (not the file's size).
        public var payloadBytes: Int
        public var metadataEntries: Int
        public var detectionEntries = 0
        public var sensorEntries = 0
        public var firstTimestamp: UInt64?
        public var lastTimestamp: UInt64?
    }

    public let path: String
    public let format: RecordedVideoFormat
    private var context: UnsafeMutablePointer<AVFormatContext>?
    private let video: UnsafeMutablePointer<AVStream>
    private let metadata: UnsafeMutablePointer<AVStream>
    private let detections: UnsafeMutablePointer<AVStream>
    private let sensors: UnsafeMutablePointer<AVStream>
    private var summary: Summary
    private var lastVideoPTS: Int64 = -1
    /// The latest time written on any track, and on each metadata track, in the file's milliseconds.
    private var lastWrittenMilliseconds: Int64 = 0
    private var lastNotePTS: Int64 = 0
    private var lastDetectionPTS: Int64 = 0
    private var lastSensorPTS: Int64 = 0
    /// How far behind the latest block a metadata entry may sit: a Matroska block's time is
    /// its cluster's plus a signed 16-bit count of milliseconds.
    private static let furthestBehindMilliseconds: Int64 = 30_000

    /// Creates the file and writes its header. `title` names the take and device for players.
    public init(path: String, format: RecordedVideoFormat, title: String) throws(RecordingError) {
        self.path = path
        self.format = format
        summary = Summary(path: path, frames: 0, payloadBytes: 0, metadataEntries: 0)
        var context: UnsafeMutablePointer<AVFormatContext>?
        var code = avformat_alloc_output_context2(&context, nil, "matroska", path)
        guard code >= 0, let context else { throw .ffmpeg("cannot set up a Matroska muxer for", path: path, code: code) }
        func fail(_ doing: String, _ code: Int32) -> RecordingError {
            capfleet_avio_close_file(&context.pointee.pb)
            avformat_free_context(context)
            return .ffmpeg(doing, path: path, code: code)
        }
        guard let video = avformat_new_stream(context, nil), let metadata = avformat_new_stream(context, nil),
            let detections = avformat_new_stream(context, nil), let sensors = avformat_new_stream(context, nil)
        else {
            throw fail("cannot add streams to", capfleet_averror(ENOMEM))
        }
        self.video = video
        self.metadata = metadata
        self.detections = detections
        self.sensors = sensors
        guard Self.describe(format, in: video.pointee.codecpar) else {
            avformat_free_context(context)
            throw .unsupportedFormat(pixelFormat: "\(format.pixelFormat)", path: path)
        }
        if !format.codecConfig.isEmpty {
            // Freed with the context; FFmpeg reads past the end, so the padding is zeroed.
            let size = format.codecConfig.count
            guard let extradata = av_mallocz(size + Int(AV_INPUT_BUFFER_PADDING_SIZE))?.assumingMemoryBound(to: UInt8.self) else {
                avformat_free_context(context)
                throw .ffmpeg("out of memory setting up", path: path, code: capfleet_averror(ENOMEM))
            }
            format.codecConfig.withUnsafeBufferPointer { extradata.update(from: $0.baseAddress!, count: size) }
            video.pointee.codecpar.pointee.extradata = extradata
            video.pointee.codecpar.pointee.extradata_size = Int32(size)
        }
        if format.frameRate > 0, format.audio == nil {
            let rate = av_d2q(format.frameRate, 1_000_000)
            video.pointee.avg_frame_rate = rate
            video.pointee.r_frame_rate = rate
        }
        video.pointee.time_base = AVRational(num: 1, den: 1_000_000_000)
        for (stream, name) in [
            (metadata, "capfleet timed metadata (JSON)"), (detections, "capfleet detections (JSON)"),
            (sensors, "capfleet sensor readings (JSON)"),
        ] {
            stream.pointee.codecpar.pointee.codec_type = AVMEDIA_TYPE_SUBTITLE
            stream.pointee.codecpar.pointee.codec_id = AV_CODEC_ID_SUBRIP
            stream.pointee.time_base = AVRational(num: 1, den: 1_000_000_000)
            av_dict_set(&stream.pointee.metadata, "title", name, 0)
        }
        av_dict_set(&context.pointee.metadata, "title", title, 0)
        av_dict_set(&context.pointee.metadata, "encoder", "capfleet", 0)
        // The pixels are not the camera's: a reader of the file alone can tell.
        if format.stabilisation != .off { av_dict_set(&video.pointee.metadata, "STABILISATION", format.stabilisation.rawValue, 0) }
        if format.audio == nil, format.bitDepth != 8 { av_dict_set(&video.pointee.metadata, "BIT_DEPTH", "\(format.bitDepth)", 0) }
        if let unit = format.depthUnitMetres { av_dict_set(&video.pointee.metadata, "DEPTH_UNIT_METRES", "\(unit)", 0) }
        // A Bayer mosaic kept as grey: the order its samples' colours come in, to demosaic it by.
        if let bayer = PixelFormat(format.sourcePixelFormat).bayer { av_dict_set(&video.pointee.metadata, "BAYER_PATTERN", bayer.pattern, 0) }

        // 1 MiB writes: the default 32 KiB buffer cost a write(2) per 32 KiB of video.
        code = capfleet_avio_open_file(&context.pointee.pb, path, 1 << 20)
        guard code >= 0 else { throw fail("cannot create", code) }
        // Clusters of at most a second: what a crash can cost before repair is one cluster.
        var options: OpaquePointer?
        av_dict_set(&options, "cluster_time_limit", "1000", 0)
        // ... and of at most 8 MiB: the muxer builds each cluster in memory before writing it,
        // and a second of 1080p is 124 MB grown by reallocation, copied again and again.
        av_dict_set(&options, "cluster_size_limit", "\(8 << 20)", 0)
        // Each segment has its SHA-256 in the index; a CRC-32 over every cluster as well cost
        // a pass over every byte on the writer's thread.
        av_dict_set(&options, "write_crc32", "0", 0)
        // Players show the video; the JSON track only when asked for.
        av_dict_set(&options, "default_mode", "infer_no_subs", 0)
        code = avformat_write_header(context, &options)
        av_dict_free(&options)
        guard code >= 0 else { throw fail("cannot write the Matroska header of", code) }
        // The muxer has chosen its own time bases (1/1000 for Matroska): rescale from here on.
        self.context = context
    }

    deinit {
        // Dropped without finish() (its owner failed): still leave a file that plays.
        if context != nil { _ = try? finish() }
    }

    public var current: Summary { summary }

    /// Appends one frame, `timestamp` ns after the take's start, lasting `duration` ns.
    public func appendFrame(_ payload: UnsafeRawBufferPointer, at timestamp: UInt64, duration: UInt64, keyframe: Bool = true) throws(RecordingError) {
        guard let context else { throw .alreadyFinished(path: path) }
        var pts = rescale(timestamp, to: video)
        // Matroska counts in milliseconds: a frame within the same one as the last (a driver
        // delivering a burst, a clock correction) goes one later, so every player and remuxer
        // sees strictly increasing times; the index and the sidecars keep the exact ones.
        pts = max(pts, lastVideoPTS + 1)
        lastVideoPTS = pts
        lastWrittenMilliseconds = max(lastWrittenMilliseconds, pts)
        try write(payload, pts: pts, duration: rescale(duration, to: video), stream: video, keyframe: keyframe, in: context)
        summary.frames += 1
        summary.payloadBytes += payload.count
        if summary.firstTimestamp == nil { summary.firstTimestamp = timestamp }
        summary.lastTimestamp = timestamp
    }

    /// Appends one timed-metadata entry (a JSON object on one line) at `timestamp` on `track`,
    /// at its own time even after later frames. An entry earlier than the last on its track
    /// goes at that one's time (a track goes forward), as does one more than 30 s behind the
    /// file's latest block; its JSON and the index keep its exact time.
    public func appendMetadata(
        _ json: String, at timestamp: UInt64, duration: UInt64 = 1_000_000_000,
        track: MetadataTrack = .notes
    ) throws(RecordingError) {
        guard let context else { throw .alreadyFinished(path: path) }
        let stream: UnsafeMutablePointer<AVStream>
        let lastOnTrack: Int64
        switch track {
        case .notes: (stream, lastOnTrack) = (metadata, lastNotePTS)
        case .detections: (stream, lastOnTrack) = (detections, lastDetectionPTS)
        case .sensors: (stream, lastOnTrack) = (sensors, lastSensorPTS)
        }
        let pts = max(rescale(timestamp, to: stream), lastOnTrack, lastWrittenMilliseconds - Self.furthestBehindMilliseconds)
        switch track {
        case .notes: lastNotePTS = pts
        case .detections: lastDetectionPTS = pts
        case .sensors: lastSensorPTS = pts
        }
        lastWrittenMilliseconds = max(lastWrittenMilliseconds, pts)
        let failure = Array(json.utf8).withUnsafeBytes { buffer -> RecordingError? in
            do throws(RecordingError) {
                try write(
                    buffer, pts: pts, duration: max(rescale(duration, to: stream), 1),
                    stream: stream, keyframe: true, in: context)
                return nil
            } catch { return error }
        }
        if let failure { throw failure }
        switch track {
        case .notes: summary.metadataEntries += 1
        case .detections: summary.detectionEntries += 1
        case .sensors: summary.sensorEntries += 1
        }
    }

    /// Puts everything written so far into the file (the muxer closes its cluster): after
    /// this a crash of this process loses none of it.
    public func flush() throws(RecordingError) {
        guard let context else { return }
        let code = av_write_frame(context, nil)
        guard code >= 0 else { throw .ffmpeg("cannot flush", path: path, code: code) }
        avio_flush(context.pointee.pb)
        if context.pointee.pb.pointee.error < 0 { throw .ffmpeg("cannot write to", path: path, code: context.pointee.pb.pointee.error) }
    }

    /// Writes the index (cues) and duration and closes the file.
    @discardableResult
    public func finish() throws(RecordingError) -> Summary {
        guard let open = context else { return summary }
        context = nil
        let trailer = av_write_trailer(open)
        let closed = capfleet_avio_close_file(&open.pointee.pb)
        avformat_free_context(open)
        guard trailer >= 0 else { throw .ffmpeg("cannot finish", path: path, code: trailer) }
        guard closed >= 0 else { throw .ffmpeg("cannot close", path: path, code: closed) }
        return summary
    }

    private func rescale(_ nanoseconds: UInt64, to stream: UnsafeMutablePointer<AVStream>) -> Int64 {
        av_rescale_q(Int64(clamping: nanoseconds), AVRational(num: 1, den: 1_000_000_000), stream.pointee.time_base)
    }

    private func write(
        _ payload: UnsafeRawBufferPointer, pts: Int64, duration: Int64, stream: UnsafeMutablePointer<AVStream>,
        keyframe: Bool, in context: UnsafeMutablePointer<AVFormatContext>
    ) throws(RecordingError) {
        guard let packet = av_packet_alloc() else { throw .ffmpeg("out of memory writing", path: path, code: capfleet_averror(ENOMEM)) }
        var packetPointer: UnsafeMutablePointer<AVPacket>? = packet
        defer { av_packet_free(&packetPointer) }
        // No copy: av_write_frame leaves the caller's data alone and the muxer copies what it
        // keeps into its cluster (a 1080p frame is 4 MB; allocating and copying it per frame
        // cost more than the muxing).
        packet.pointee.data = payload.baseAddress.map { UnsafeMutablePointer(mutating: $0.assumingMemoryBound(to: UInt8.self)) }
        packet.pointee.size = Int32(payload.count)
        packet.pointee.pts = pts
        packet.pointee.dts = pts
        packet.pointee.duration = duration
        packet.pointee.stream_index = stream.pointee.index
        if keyframe { packet.pointee.flags |= AV_PKT_FLAG_KEY }
        // Written in time order by the caller, so no interleaving queue: a sparse metadata
        // track would otherwise hold seconds of video in memory.
        let code = av_write_frame(context, packet)
        guard code >= 0 else { throw .ffmpeg("cannot write a frame to", path: path, code: code) }
    }

    /// Fills in the codec parameters for `format`; false if the fleet cannot record it.
    private static func describe(_ format: RecordedVideoFormat, in parameters: UnsafeMutablePointer<AVCodecParameters>) -> Bool {
        if let audio = format.audio {
            // A microphone's packets, FLAC as its agent encoded them; STREAMINFO is the CodecPrivate.
            guard format.pixelFormat.fourCC == RecordedVideoFormat.flacFourCC else { return false }
            parameters.pointee.codec_type = AVMEDIA_TYPE_AUDIO
            parameters.pointee.codec_id = AV_CODEC_ID_FLAC
            parameters.pointee.sample_rate = Int32(audio.sampleRate)
            av_channel_layout_default(&parameters.pointee.ch_layout, Int32(audio.channels))
            parameters.pointee.bits_per_raw_sample = audio.sampleFormat == .s16le ? 16 : 24
            parameters.pointee.format = AV_SAMPLE_FMT_S16.rawValue
            if format.frameRate > 0 { parameters.pointee.frame_size = Int32((Double(audio.sampleRate) / format.frameRate).rounded()) }
            return true
        }
        parameters.pointee.codec_type = AVMEDIA_TYPE_VIDEO
        parameters.pointee.width = Int32(format.width)
        parameters.pointee.height = Int32(format.height)
        switch format.pixelFormat.fourCC {
        case "MJPG", "JPEG":
            parameters.pointee.codec_id = AV_CODEC_ID_MJPEG
        case "H264":
            parameters.pointee.codec_id = AV_CODEC_ID_H264
        case "HEVC":
            parameters.pointee.codec_id = AV_CODEC_ID_HEVC
        case "FFV1":
            parameters.pointee.codec_id = AV_CODEC_ID_FFV1
        default:
            guard let pixel = rawPixelFormats[format.pixelFormat.fourCC] else { return false }
            parameters.pointee.codec_id = AV_CODEC_ID_RAWVIDEO
            parameters.pointee.format = pixel.rawValue
            // The fourcc Matroska stores as the uncompressed track's colour space (YUY2, NV12…).
            parameters.pointee.codec_tag = avcodec_pix_fmt_to_codec_tag(pixel)
        }
        if format.bitDepth != 8 { parameters.pointee.bits_per_raw_sample = Int32(format.bitDepth) }
        if let colour = format.colour {
            // Matroska's Colour element: the H.273 codes, which FFmpeg's enums are.
            parameters.pointee.color_primaries = AVColorPrimaries(rawValue: UInt32(colour.primaries.h273Code))
            parameters.pointee.color_trc = AVColorTransferCharacteristic(rawValue: UInt32(colour.transfer.h273Code))
            parameters.pointee.color_space = AVColorSpace(rawValue: UInt32(colour.matrix.h273Code))
            parameters.pointee.color_range = colour.range == .full ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG
        }
        return true
    }

    /// Raw formats a track stores as they came: FFmpeg's layout of each, so players read them.
    private static let rawPixelFormats: [String: AVPixelFormat] = [
        "YUYV": AV_PIX_FMT_YUYV422, "UYVY": AV_PIX_FMT_UYVY422, "NV12": AV_PIX_FMT_NV12, "GREY": AV_PIX_FMT_GRAY8,
            // The formats of 16-bit words are not among them: FFmpeg's Matroska muxer stores no
            // uncompressed layout deeper than 8 bits ("Raw RGB is not supported natively"), so
            // takes encode them (recordings.md, "Deeper pixels").
    ]
}
