import CAVFormat
import Glibc

/// SHA-256 of a finished segment file, read in 1 MiB blocks (libavutil's implementation, so
/// no other crypto library is linked). Blocking disk I/O: call it on a thread you own.
public enum SegmentDigest {
    public static func sha256(ofFile path: String) throws(RecordingError) -> String {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw RecordingError("cannot read \(path) to checksum it: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        guard let sha = av_sha_alloc() else { throw RecordingError("out of memory checksumming \(path)") }
        defer { av_free(UnsafeMutableRawPointer(sha)) }
        av_sha_init(sha, 256)
        var block = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = block.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { throw RecordingError("cannot read \(path) to checksum it: \(String(cString: strerror(errno)))") }
            if count == 0 { break }
            block.withUnsafeBufferPointer { av_sha_update(sha, $0.baseAddress, count) }
        }
        var digest = [UInt8](repeating: 0, count: 32)
        av_sha_final(sha, &digest)
        return digest.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }
}
