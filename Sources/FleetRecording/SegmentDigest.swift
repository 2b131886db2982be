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

/// A SHA-256 computed as the bytes go by, in order (a collected copy hashed as it is written,
/// so that finishing it does not read gigabytes back). One thread uses it.
public final class RunningDigest {
    private let context: OpaquePointer
    public private(set) var bytes: UInt64 = 0

    public init() throws(RecordingError) {
        guard let context = EVP_MD_CTX_new() else { throw .checksum(path: "(running)", step: "allocating a context for") }
        self.context = context
        guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else { throw .checksum(path: "(running)", step: "starting") }
    }

    deinit { EVP_MD_CTX_free(context) }

    public func update(_ chunk: UnsafeRawBufferPointer) throws(RecordingError) {
        guard chunk.count > 0 else { return }
        guard EVP_DigestUpdate(context, chunk.baseAddress, chunk.count) == 1 else { throw .checksum(path: "(running)", step: "updating") }
        bytes += UInt64(chunk.count)
    }

    /// Adds the first `length` bytes of the file at `path` (what an earlier run already wrote).
    public func update(fromFile path: String, length: UInt64) throws(RecordingError) {
        let doing = "cannot read \(path) to checksum it"
        let descriptor: Int32
        do { descriptor = try systemCall("open", on: path) { open(path, O_RDONLY | O_CLOEXEC) } } catch { throw .system(doing: doing, error) }
        defer { close(descriptor) }
        var block = [UInt8](repeating: 0, count: 1 << 20)
        var left = length
        while left > 0 {
            let wanted = Int(min(left, UInt64(block.count)))
            let count: Int
            do { count = try systemCall("read", on: path) { block.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, wanted) } } } catch {
                throw .system(doing: doing, error)
            }
            guard count > 0 else { throw .checksum(path: path, step: "reading the first \(length) bytes of") }
            let updated = block.withUnsafeBytes { raw in EVP_DigestUpdate(context, raw.baseAddress, count) }
            guard updated == 1 else { throw .checksum(path: path, step: "updating") }
            bytes += UInt64(count)
            left -= UInt64(count)
        }
    }

    /// The digest as lowercase hex; the digest is done with after this.
    public func finish() throws(RecordingError) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context, &digest, &length) == 1, length == 32 else { throw .checksum(path: "(running)", step: "finishing") }
        return digest.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }
}
