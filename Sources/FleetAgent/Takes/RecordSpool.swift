import FleetCapture
import FleetCore
import FleetProtocol
import FleetSystem
import Glibc

/// A recorded frame's pixels, held until the coordinator has stored them: the copy made out
/// of the capture buffer (which went back to the camera at once), or read back from the disk
/// spool. libzmq may hold the buffer too while it is on the wire: sent without a further copy.
/// Filled once, read-only after, like every `FrameBuffer`.
struct SpooledBytes: Sendable {
    let buffer: FrameBuffer
    let count: Int
}

/// Where a spooled frame's pixels wait.
enum SpooledPixels: Sendable {
    case memory(SpooledBytes)
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
enum SpoolError: Error, CustomStringConvertible {
    /// A system call failed on the spool's files (errno kept: ENOSPC, EIO...).
    case system(SystemCallError)
    /// Both tiers are full.
    case full(memoryBytes: Int, diskBytes: Int64)
    /// A spool file ended before the frame it should hold.
    case shortFile(path: String)
    /// The spool (or one of its files) was removed while frames still pointed into it.
    case spoolGone(directory: String, file: Int)

    var description: String {
        switch self {
        case let .system(error):
            "the recording spool failed: \(error)"
        case let .full(memoryBytes, diskBytes):
            "the spool is full (\(memoryBytes >> 20) MiB in memory, \(diskBytes >> 20) MiB on disk)"
        case let .shortFile(path):
            "cannot read back the spool file \(path): it is shorter than the frames it should hold"
        case let .spoolGone(directory, file):
            "spool file \(file) in \(directory) is gone"
        }
    }
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
            do throws(SystemCallError) {
                let fd = try systemCall("open", on: path) { open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600) }
                files[writing] = (fd, 0, 0)
            } catch {
                throw .system(error)
            }
        }
        let file = files[writing]!
        var written = 0
        while written < bytes.count {
            do throws(SystemCallError) {
                written += try systemCall("pwrite", on: path(writing)) {
                    pwrite(file.fd, bytes.baseAddress! + written, bytes.count - written, off_t(file.size) + off_t(written))
                }
            } catch {
                throw .system(error)
            }
        }
        files[writing] = (file.fd, file.size + Int64(bytes.count), file.live + 1)
        bytesOnDisk += Int64(bytes.count)
        return .disk(file: writing, offset: file.size, length: bytes.count)
    }

    func read(file: Int, offset: Int64, length: Int) throws(SpoolError) -> SpooledBytes {
        guard let entry = files[file] else { throw .spoolGone(directory: directory, file: file) }
        let target = FrameBuffer(unpooledCapacity: length)
        var done = 0
        while done < length {
            let n: Int
            do throws(SystemCallError) {
                n = try systemCall("pread", on: path(file)) { pread(entry.fd, target.storage + done, length - done, off_t(offset) + off_t(done)) }
            } catch {
                throw .system(error)
            }
            guard n > 0 else { throw .shortFile(path: path(file)) }
            done += n
        }
        return SpooledBytes(buffer: target, count: length)
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
            do throws(SystemCallError) {
                // A directory that is there already is what was wanted.
                try systemCall("mkdir", on: built) {
                    let result = mkdir(built, 0o700)
                    return result != 0 && errno == EEXIST ? 0 : result
                }
            } catch {
                throw .system(error)
            }
        }
    }
}
