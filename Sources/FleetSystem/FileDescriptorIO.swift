import Glibc

/// Whole reads and writes on a file descriptor: the kernel may move fewer bytes than asked
/// (a signal, a pipe's room, a file's end), so every caller would otherwise loop on its own.
/// EINTR is retried; anything else is a `SystemCallError` naming the call and `target`.
public enum FileDescriptorIO {
    /// Writes all of `bytes`, at `offset` when given (pwrite), else at the file's position.
    public static func writeAll(
        _ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, at offset: UInt64? = nil,
        target: @autoclosure () -> String
    ) throws(SystemCallError) {
        guard let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let written = try systemCall(offset == nil ? "write" : "pwrite", on: target()) {
                if let offset {
                    pwrite(descriptor, base + done, bytes.count - done, off_t(offset) + off_t(done))
                } else {
                    write(descriptor, base + done, bytes.count - done)
                }
            }
            // A zero-byte write of a non-empty buffer would loop for ever: the device is full.
            guard written > 0 else { throw SystemCallError(call: offset == nil ? "write" : "pwrite", target: target(), errno: ENOSPC) }
            done += written
        }
    }

    public static func writeAll(
        _ descriptor: Int32, _ bytes: [UInt8], at offset: UInt64? = nil,
        target: @autoclosure () -> String
    ) throws(SystemCallError) {
        let outcome = bytes.withUnsafeBytes { raw in
            Result { () throws(SystemCallError) in try writeAll(descriptor, raw, at: offset, target: target()) }
        }
        try outcome.get()
    }

    /// Reads exactly `count` bytes at `offset` (pread), else at the file's position; a file
    /// that ends first is EIO (the caller asked for bytes it said were there).
    public static func readExactly(
        _ descriptor: Int32, count: Int, at offset: UInt64? = nil,
        target: @autoclosure () -> String
    ) throws(SystemCallError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let outcome = buffer.withUnsafeMutableBytes { raw in
                Result { () throws(SystemCallError) -> Int in
                    try systemCall(offset == nil ? "read" : "pread", on: target()) {
                        if let offset {
                            pread(descriptor, raw.baseAddress! + done, count - done, off_t(offset) + off_t(done))
                        } else {
                            Glibc.read(descriptor, raw.baseAddress! + done, count - done)
                        }
                    }
                }
            }
            let read = try outcome.get()
            guard read > 0 else { throw SystemCallError(call: offset == nil ? "read" : "pread", target: target(), errno: EIO) }
            done += read
        }
        return buffer
    }

    /// Reads what is there, up to the buffer's size: 0 at the end of the file or pipe.
    public static func readSome(
        _ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, target: @autoclosure () -> String
    ) throws(SystemCallError) -> Int {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return 0 }
        return try systemCall("read", on: target()) { Glibc.read(descriptor, base, buffer.count) }
    }
}
