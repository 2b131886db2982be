import CAVFormat
import FleetCore
import FleetSystem
import Glibc

/// Makes a segment that a crash left unfinished play again: a Matroska file cut off mid-write
/// has no index, no duration and maybe half a cluster at its end. Every whole frame and
/// metadata entry it holds is copied, as it is, into a new file with a proper ending, which
/// then replaces the old one (a rename, so a crash during repair leaves the original).
/// Blocking disk I/O: call it on a thread you own.
public enum SegmentRepair {
    public struct Outcome: Sendable, Equatable {
        public var frames: Int
        public var payloadBytes: Int
        public var metadataEntries: Int
        /// Fleet ns since the take started, at Matroska's millisecond resolution.
        public var firstTimestamp: UInt64?
        public var lastTimestamp: UInt64?
        /// Frames cut short by the crash and left out.
        public var partialFramesDropped: Int
        /// The kept frames' sequence numbers, from the file's sequence markers (nil in a file
        /// without them), and the drops the markers report.
        public var firstSequence: UInt64?
        public var lastSequence: UInt64?
        public var dropped = DropTally()
    }

    public static func repair(path: String) throws(RecordingError) -> Outcome {
        var opened: UnsafeMutablePointer<AVFormatContext>?
        var code = avformat_open_input(&opened, path, nil, nil)
        guard code >= 0, let input = opened else { throw .ffmpeg("cannot read the unfinished segment", path: path, code: code) }
        defer { avformat_close_input(&opened) }
        // The demuxer learns a raw track's pixel format only by looking at its frames.
        code = avformat_find_stream_info(input, nil)
        guard code >= 0 else { throw .ffmpeg("cannot read the streams of the unfinished segment", path: path, code: code) }
        let temporary = path + ".repair"
        var output: UnsafeMutablePointer<AVFormatContext>?
        code = avformat_alloc_output_context2(&output, nil, "matroska", temporary)
        guard code >= 0, let output else { throw .ffmpeg("cannot set up a Matroska muxer for", path: temporary, code: code) }
        var finished = false
        defer {
            if !finished {
                avio_closep(&output.pointee.pb)
                unlink(temporary)
            }
            avformat_free_context(output)
        }

        // Same streams, same parameters; raw frames must be whole to be kept.
        var wholeFrameBytes: [Int32: Int32] = [:]
        for index in 0..<Int(input.pointee.nb_streams) {
            guard let source = input.pointee.streams[index], let copy = avformat_new_stream(output, nil) else {
                throw .ffmpeg("cannot copy the streams of", path: path, code: capfleet_averror(ENOMEM))
            }
            code = avcodec_parameters_copy(copy.pointee.codecpar, source.pointee.codecpar)
            guard code >= 0 else { throw .ffmpeg("cannot copy the streams of", path: path, code: code) }
            copy.pointee.codecpar.pointee.codec_tag = source.pointee.codecpar.pointee.codec_tag
            copy.pointee.time_base = source.pointee.time_base
            copy.pointee.avg_frame_rate = source.pointee.avg_frame_rate
            av_dict_copy(&copy.pointee.metadata, source.pointee.metadata, 0)
            let parameters = source.pointee.codecpar.pointee
            if parameters.codec_id == AV_CODEC_ID_RAWVIDEO, parameters.format >= 0 {
                let bytes = av_image_get_buffer_size(AVPixelFormat(rawValue: parameters.format), parameters.width, parameters.height, 1)
                if bytes > 0 { wholeFrameBytes[Int32(index)] = bytes }
            }
        }
        av_dict_copy(&output.pointee.metadata, input.pointee.metadata, 0)
        code = avio_open(&output.pointee.pb, temporary, AVIO_FLAG_WRITE)
        guard code >= 0 else { throw .ffmpeg("cannot create", path: temporary, code: code) }
        var options: OpaquePointer?
        av_dict_set(&options, "cluster_time_limit", "1000", 0)
        av_dict_set(&options, "default_mode", "infer_no_subs", 0)
        code = avformat_write_header(output, &options)
        av_dict_free(&options)
        guard code >= 0 else { throw .ffmpeg("cannot write the Matroska header of", path: temporary, code: code) }

        var outcome = Outcome(frames: 0, payloadBytes: 0, metadataEntries: 0, partialFramesDropped: 0)
        var nextSequence: UInt64?
        guard let packet = av_packet_alloc() else { throw .ffmpeg("out of memory repairing", path: path, code: capfleet_averror(ENOMEM)) }
        var packetPointer: UnsafeMutablePointer<AVPacket>? = packet
        defer { av_packet_free(&packetPointer) }
        // Read until the file ends or its cut-off tail stops making sense.
        while av_read_frame(input, packet) >= 0 {
            defer { av_packet_unref(packet) }
            let streamIndex = packet.pointee.stream_index
            guard let source = input.pointee.streams[Int(streamIndex)], let target = output.pointee.streams[Int(streamIndex)] else { continue }
            let isVideo = source.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO
            let corrupt = packet.pointee.flags & AV_PKT_FLAG_CORRUPT != 0
            if isVideo, corrupt || wholeFrameBytes[streamIndex].map({ $0 != packet.pointee.size }) ?? false {
                outcome.partialFramesDropped += 1
                continue
            }
            if !isVideo, let data = packet.pointee.data,
                let marker = SequenceMarker(json: String(decoding: UnsafeBufferPointer(start: data, count: Int(packet.pointee.size)), as: UTF8.self))
            {
                nextSequence = marker.sequence
                outcome.dropped = outcome.dropped.adding(marker.dropped)
            }
            let nanoseconds = av_rescale_q(packet.pointee.pts, source.pointee.time_base, AVRational(num: 1, den: 1_000_000_000))
            av_packet_rescale_ts(packet, source.pointee.time_base, target.pointee.time_base)
            packet.pointee.pos = -1
            let size = Int(packet.pointee.size)
            code = av_write_frame(output, packet)
            guard code >= 0 else { throw .ffmpeg("cannot write the repaired copy", path: temporary, code: code) }
            if isVideo {
                if let sequence = nextSequence {
                    if outcome.firstSequence == nil { outcome.firstSequence = sequence }
                    outcome.lastSequence = sequence
                    nextSequence = sequence + 1
                }
                outcome.frames += 1
                outcome.payloadBytes += size
                if outcome.firstTimestamp == nil { outcome.firstTimestamp = UInt64(max(nanoseconds, 0)) }
                outcome.lastTimestamp = UInt64(max(nanoseconds, 0))
            } else {
                outcome.metadataEntries += 1
            }
        }
        code = av_write_trailer(output)
        guard code >= 0 else { throw .ffmpeg("cannot finish the repaired copy", path: temporary, code: code) }
        code = avio_closep(&output.pointee.pb)
        guard code >= 0 else { throw .ffmpeg("cannot close the repaired copy", path: temporary, code: code) }
        finished = true
        // The copy is complete on disk before it takes the original's place.
        let descriptor = open(temporary, O_RDONLY | O_CLOEXEC)
        if descriptor >= 0 {
            fsync(descriptor)
            close(descriptor)
        }
        guard rename(temporary, path) == 0 else {
            let error = SystemCallError(call: "rename", target: temporary, errno: errno)
            unlink(temporary)
            throw .system(doing: "cannot put the repaired copy of \(path) in place", error)
        }
        return outcome
    }
}
