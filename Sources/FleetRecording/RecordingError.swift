import CAVFormat

/// What went wrong writing or reading a recording, and what to do about it.
public struct RecordingError: Error, CustomStringConvertible, Sendable {
    public let description: String

    public init(_ description: String) { self.description = description }

    /// An FFmpeg call that failed: what we were doing, the path, and FFmpeg's own words.
    static func ffmpeg(_ doing: String, path: String, code: Int32) -> RecordingError {
        var buffer = [CChar](repeating: 0, count: 128)
        let message = buffer.withUnsafeMutableBufferPointer { String(cString: capfleet_av_strerror(code, $0.baseAddress, $0.count)) }
        let hint = code == capfleet_averror(ENOSPC) ? " (the disk is full: free space or lower the retention budget)" : ""
        return RecordingError("\(doing) \(path): \(message)\(hint)")
    }
}
