import CAVCodec
import FleetCore

/// Why a take's encoder could not start or go on; each says what to do about it.
public enum EncodingError: Error, Equatable, CustomStringConvertible {
    /// The camera's pixel format is not one the encoder is fed from.
    case unsupportedSource(pixelFormat: String, codec: VideoCodec)
    /// A picture size the codec cannot take (4:2:0 and 4:2:2 need even sizes).
    case unsupportedSize(width: Int, height: Int, codec: VideoCodec)
    /// This host's FFmpeg has no such encoder.
    case encoderMissing(name: String, codec: VideoCodec)
    /// A frame shorter than its format says.
    case shortFrame(expected: Int, got: Int)
    /// An FFmpeg call failed.
    case ffmpeg(doing: String, encoder: String, code: Int32)
    /// Stabilisation asked of a codec that keeps the camera's pixels.
    case unsupportedStabilisation(codec: VideoCodec)
    /// A depth camera's distances, or a Bayer mosaic, asked of a lossy codec, which would change them.
    case depthNeedsLossless(codec: VideoCodec)
    /// Stabilisation asked of a camera deeper than 8 bits (the filter steadies 8-bit pictures).
    case stabilisationNeedsEightBits(pixelFormat: String)
    /// This host's FFmpeg has no decoder for the codec (or it is raw: nothing to decode).
    case decoderMissing(codec: VideoCodec)
    /// A decoded picture that is not repacked into that camera format (deeper than 8 bits).
    case cannotRepack(from: String, to: String)

    public var description: String {
        switch self {
        case let .unsupportedSource(pixelFormat, codec):
            "\(codec.rawValue) cannot be made from \(pixelFormat) frames here: the agent encodes YUYV, UYVY, NV12, GREY, Y10, Y12, Y16, P010, P016 and Z16; record this camera with --codec raw, or pick one of those formats (capfleet format)"
        case let .unsupportedSize(width, height, codec):
            "\(codec.rawValue) needs an even width and height; \(width)x\(height) is not: pick another size (capfleet format) or record it with --codec raw"
        case let .encoderMissing(name, codec):
            "this host's FFmpeg has no \(name) encoder for \(codec.rawValue): install Debian's libavcodec59 (it has libx264, libx265 and ffv1), or record with another --codec"
        case let .shortFrame(expected, got):
            "a frame of \(got) bytes is shorter than its format's \(expected): the camera delivered a cut-off frame"
        case let .ffmpeg(doing, encoder, code):
            "\(doing) (\(encoder)): \(Self.message(code))"
        case let .depthNeedsLossless(codec):
            "a depth camera's distances and a Bayer mosaic's samples are what \(codec.rawValue) would change: record it with --codec ffv1, lossless (--codec-for CAMERA=ffv1 in a take of other codecs)"
        case let .stabilisationNeedsEightBits(pixelFormat):
            "stabilisation steadies 8-bit pictures, and \(pixelFormat) is deeper: record this camera without --stabilise, or pick an 8-bit format (capfleet format)"
        case let .decoderMissing(codec):
            "this host's FFmpeg has no \(codec.rawValue) decoder: install Debian's libavcodec59"
        case let .cannotRepack(from, to):
            "a decoded \(from) picture is not repacked into \(to) here: only 8-bit NV12, YUYV, UYVY and GREY cameras' pictures are"
        case let .unsupportedStabilisation(codec):
            "\(codec.rawValue) keeps the camera's pixels, and stabilisation alters them: stabilise an h264 or hevc take, or record this one without --stabilise"
        }
    }

    static func message(_ code: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 128)
        return String(cString: capfleet_codec_strerror(code, &buffer, buffer.count))
    }
}
