import CAVFormat
import Glibc

/// A segment file's packets in file order, as libavformat demuxes them (what ffprobe reads):
/// each video frame's timestamp, and each timed-metadata entry's text. What the readers of
/// a take's files (SegmentVerifier, SegmentFrameTimes) share. Blocking disk I/O.
enum SegmentPackets {
    enum Packet {
        /// A video frame at this timestamp (ns from the take's start, as the file rounds it).
        case video(nanoseconds: Int64)
        /// A timed-metadata entry: one JSON object.
        case metadata(String)
    }

    /// Calls `visit` with every packet. With `skippingVideo` the demuxer skips the video
    /// blocks instead of reading them (a frame read while probing the streams may still come).
    static func read(_ path: String, skippingVideo: Bool = false, _ visit: (Packet) -> Void) throws(RecordingError) {
        var opened: UnsafeMutablePointer<AVFormatContext>?
        var code = avformat_open_input(&opened, path, nil, nil)
        guard code >= 0, let input = opened else { throw .ffmpeg("cannot open", path: path, code: code) }
        defer { avformat_close_input(&opened) }
        code = avformat_find_stream_info(input, nil)
        guard code >= 0 else { throw .ffmpeg("cannot read the streams of", path: path, code: code) }
        if skippingVideo {
            for index in 0..<Int(input.pointee.nb_streams) {
                guard let stream = input.pointee.streams[index], stream.pointee.codecpar.pointee.codec_type != AVMEDIA_TYPE_SUBTITLE else { continue }
                stream.pointee.discard = AVDISCARD_ALL
            }
        }
        guard let packet = av_packet_alloc() else { throw .ffmpeg("out of memory reading", path: path, code: capfleet_averror(ENOMEM)) }
        var packetPointer: UnsafeMutablePointer<AVPacket>? = packet
        defer { av_packet_free(&packetPointer) }
        while true {
            code = av_read_frame(input, packet)
            if code == CAPFLEET_AVERROR_EOF { break }
            guard code >= 0 else { throw .ffmpeg("cannot read a packet of", path: path, code: code) }
            defer { av_packet_unref(packet) }
            guard let stream = input.pointee.streams[Int(packet.pointee.stream_index)] else { continue }
            // A camera's frames or a microphone's FLAC packets: the segment's main track.
            let type = stream.pointee.codecpar.pointee.codec_type
            if type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO {
                visit(.video(nanoseconds: av_rescale_q(packet.pointee.pts, stream.pointee.time_base, AVRational(num: 1, den: 1_000_000_000))))
            } else if let data = packet.pointee.data {
                visit(.metadata(String(decoding: UnsafeBufferPointer(start: data, count: Int(packet.pointee.size)), as: UTF8.self)))
            }
        }
    }
}
