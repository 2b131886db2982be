import FleetCapture
import FleetCore
import FleetProtocol
import Glibc

/// A recorded frame's pixels, held until the coordinator has stored them: a copy made out of
/// the capture buffer (which goes back to the camera at once), or read back from the disk
/// spool. libzmq may hold it too while it is on the wire: sent without a further copy.
final class SpoolBuffer: @unchecked Sendable {
    let storage: UnsafeMutableRawPointer
    let count: Int
    /// The frame buffer this shares (read-only once filled); nil when the memory is its own.
    private let owner: FrameBuffer?

    /// Takes over memory allocated with `UnsafeMutableRawPointer.allocate`.
    init(adopting storage: UnsafeMutableRawPointer, count: Int) {
        self.storage = storage
        self.count = count
        owner = nil
    }

    /// Shares an unpooled frame buffer's first `count` bytes.
    init(sharing buffer: FrameBuffer, count: Int) {
        storage = buffer.storage
        self.count = count
        owner = buffer
    }

    deinit { if owner == nil { storage.deallocate() } }
}

/// Where a spooled frame's pixels wait.
enum SpooledPixels: Sendable {
    case memory(SpoolBuffer)
    case disk(file: Int, offset: Int64, length: Int)
}

/// One frame of a take waiting on the agent: its header as captured, the take's drops up to
/// it, and its pixels.
struct SpooledFrame: Sendable {
    var header: Capfleet_V1_FrameHeader
    var takeDrops: DropTally
    var pixels: SpooledPixels
}

/// What went wrong spooling to disk; the frame is then dropped as out of buffers.
struct SpoolError: Error, CustomStringConvertible {
    let description: String
}

/// The disk tier of one take device's spool: append-only files in a directory of its own,
/// each removed once every frame in it is stored by the coordinator. Frames go here when
/// the memory tier is full: the coordinator is unreachable or slower than the camera.
/// Blocking disk I/O: only the recording sender's thread uses it.
final class DiskSpool {
    let directory: String
    private let fileLimit: Int64
    private var files: [Int: (fd: Int32, size: Int64, live: Int)] = [:]
    private var writing = 0
    private(set) var bytesOnDisk: Int64 = 0

    init(directory: String, fileLimit: Int64 = 256 << 20) throws(SpoolError) {
        self.directory = directory
        self.fileLimit = fileLimit
        try Self.makeDirectories(directory)
    }

    deinit { removeAll() }

    func append(_ bytes: UnsafeRawBufferPointer) throws(SpoolError) -> SpooledPixels {
        if files[writing] == nil || files[writing]!.size + Int64(bytes.count) > fileLimit && files[writing]!.size > 0 {
            writing += 1
            let path = self.path(writing)
            let fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw SpoolError(description: "cannot create the spool file \(path): \(String(cString: strerror(errno)))") }
            files[writing] = (fd, 0, 0)
        }
        let file = files[writing]!
        var written = 0
        while written < bytes.count {
            let n = pwrite(file.fd, bytes.baseAddress! + written, bytes.count - written, off_t(file.size) + off_t(written))
            if n < 0, errno == EINTR { continue }
            guard n > 0 else {
                throw SpoolError(description: "cannot write to the spool in \(directory): \(String(cString: strerror(errno)))")
            }
            written += n
        }
        files[writing] = (file.fd, file.size + Int64(bytes.count), file.live + 1)
        bytesOnDisk += Int64(bytes.count)
        return .disk(file: writing, offset: file.size, length: bytes.count)
    }

    func read(file: Int, offset: Int64, length: Int) throws(SpoolError) -> SpoolBuffer {
        guard let entry = files[file] else { throw SpoolError(description: "spool file \(file) in \(directory) is gone") }
        let target = UnsafeMutableRawPointer.allocate(byteCount: max(length, 1), alignment: 16)
        var done = 0
        while done < length {
            let n = pread(entry.fd, target + done, length - done, off_t(offset) + off_t(done))
            if n < 0, errno == EINTR { continue }
            guard n > 0 else {
                target.deallocate()
                throw SpoolError(description: "cannot read back the spool in \(directory): \(n == 0 ? "file too short" : String(cString: strerror(errno)))")
            }
            done += n
        }
        return SpoolBuffer(adopting: target, count: length)
    }

    /// A frame in `file` is stored: the file goes once none of its frames is left.
    func release(file: Int, length: Int) {
        guard var entry = files[file] else { return }
        entry.live -= 1
        bytesOnDisk -= Int64(length)
        if entry.live <= 0 {
            close(entry.fd)
            unlink(path(file))
            files[file] = nil
        } else {
            files[file] = entry
        }
    }

    func removeAll() {
        for (number, entry) in files {
            close(entry.fd)
            unlink(path(number))
        }
        files.removeAll()
        bytesOnDisk = 0
        rmdir(directory)
    }

    private func path(_ number: Int) -> String { directory + "/spool-\(number).bin" }

    static func makeDirectories(_ path: String) throws(SpoolError) {
        var built = ""
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            built += "/" + component
            if mkdir(built, 0o700) != 0, errno != EEXIST {
                throw SpoolError(description: "cannot create the spool directory \(built): \(String(cString: strerror(errno)))")
            }
        }
    }
}
