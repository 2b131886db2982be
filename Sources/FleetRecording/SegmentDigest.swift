import CAVFormat
import CCrypto
import FleetSystem
import Glibc

/// SHA-256 of a finished segment file, read in 1 MiB blocks (OpenSSL's libcrypto, which uses
/// the CPU's SHA instructions). Blocking disk I/O: call it on a thread you own.
public enum SegmentDigest {
    public static func sha256(ofFile path: String) throws(RecordingError) -> String {
        let doing = "cannot read \(path) to checksum it"
        let descriptor: Int32
        do { descriptor = try systemCall("open", on: path) { open(path, O_RDONLY | O_CLOEXEC) } } catch { throw .system(doing: doing, error) }
        defer { close(descriptor) }
        guard let context = EVP_MD_CTX_new() else { throw .checksum(path: path, step: "allocating a context for") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else { throw .checksum(path: path, step: "starting") }
        var block = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count: Int
            do { count = try systemCall("read", on: path) { block.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) } } } catch {
                throw .system(doing: doing, error)
            }
            if count == 0 { break }
            guard block.withUnsafeBufferPointer({ EVP_DigestUpdate(context, $0.baseAddress, count) }) == 1 else {
                throw .checksum(path: path, step: "updating")
            }
        }
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context, &digest, &length) == 1, length == 32 else { throw .checksum(path: path, step: "finishing") }
        return digest.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }
}

/// Free space where recordings go.
public enum DiskSpace {
    /// Bytes available to this process on the file system holding `path` (or its nearest
    /// existing parent); nil if it cannot be read.
    public static func availableBytes(at path: String) -> Int64? {
        statistics(at: path).map { Int64($0.f_bavail) * Int64($0.f_frsize) }
    }

    /// Total bytes of that file system.
    public static func totalBytes(at path: String) -> Int64? {
        statistics(at: path).map { Int64($0.f_blocks) * Int64($0.f_frsize) }
    }

    /// statvfs of `path`, or of its nearest parent that exists (a take's folder before its first segment).
    private static func statistics(at path: String) -> statvfs? {
        var candidate = path
        while true {
            var stats = statvfs()
            if statvfs(candidate, &stats) == 0 { return stats }
            guard errno == ENOENT, let slash = candidate.lastIndex(of: "/"), slash != candidate.startIndex else { return nil }
            candidate = String(candidate[..<slash])
        }
    }
}
