import CAVFormat
import FleetSystem
import Glibc

/// What went wrong writing or reading a recording: the cause as it came (errno, FFmpeg's
/// code, the index's error), so callers ask it questions (`isDiskFull`) instead of reading
/// words, and the words for the operator derive from it.
public enum RecordingError: Error, CustomStringConvertible, Sendable {
    /// A system call on a recording's file failed.
    case system(doing: String, SystemCallError)
    /// An FFmpeg call failed: what we were doing, the path, and FFmpeg's error code.
    case ffmpeg(doing: String, path: String, code: Int32)
    /// libcrypto could not checksum a file.
    case checksum(path: String, step: String)
    /// The format cannot be recorded.
    case unsupportedFormat(pixelFormat: String, path: String)
    /// A segment was used after it was finished: a bug in the caller.
    case alreadyFinished(path: String)
    /// The recordings index refused a write.
    case index(what: String, underlying: any Error)
    /// The checksummer stopped before it got to a file.
    case checksummerStopped(path: String)

    public var description: String {
        switch self {
        case let .system(doing, error):
            "\(doing): \(String(cString: strerror(error.errno)))\(error.errno == ENOSPC ? Self.diskFullHint : "")"
        case let .ffmpeg(doing, path, code):
            "\(doing) \(path): \(Self.ffmpegMessage(code))\(code == capfleet_averror(ENOSPC) ? Self.diskFullHint : "")"
        case let .checksum(path, step):
            "libcrypto failed \(step) checksumming \(path)"
        case let .unsupportedFormat(format, path):
            "cannot record \(format) frames into \(path): the fleet stores YUYV, UYVY, NV12 and GREY raw, MJPEG and H.264 as they come; record Y10, Y12, Y16, P010, P016 and Z16 with --codec ffv1 (lossless), or pick another format (capfleet format)"
        case let .alreadyFinished(path):
            "\(path) is already finished"
        case let .index(what, underlying):
            "the recordings index, \(what): \(underlying)"
        case let .checksummerStopped(path):
            "the checksummer stopped before \(path) was checksummed"
        }
    }

    /// The disk ran out of space (the take stops; what is written stays valid).
    public var isDiskFull: Bool {
        switch self {
        case let .system(_, error): error.errno == ENOSPC
        case let .ffmpeg(_, _, code): code == capfleet_averror(ENOSPC)
        default: false
        }
    }

    static func ffmpeg(_ doing: String, path: String, code: Int32) -> RecordingError {
        .ffmpeg(doing: doing, path: path, code: code)
    }

    private static let diskFullHint = " (the disk is full: free space or lower the retention budget)"

    private static func ffmpegMessage(_ code: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 128)
        return buffer.withUnsafeMutableBufferPointer { String(cString: capfleet_av_strerror(code, $0.baseAddress, $0.count)) }
    }
}
