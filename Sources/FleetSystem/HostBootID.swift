import Glibc

/// This machine's boot id (/proc/sys/kernel/random/boot_id): a UUID the kernel draws at boot,
/// naming which machine's CLOCK_MONOTONIC a time is in. Every network namespace of one machine
/// reads the same id, as they read the same clock; a reboot or another machine reads another.
public enum HostBootID {
    public static let path = "/proc/sys/kernel/random/boot_id"

    /// The id as the kernel writes it (lowercase, 8-4-4-4-12), without its newline.
    public static func read(from path: String = path) throws(SystemCallError) -> String {
        let descriptor = try systemCall("open", on: path) { open(path, O_RDONLY | O_CLOEXEC) }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 64)
        let outcome = bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(SystemCallError) -> Int in try FileDescriptorIO.readSome(descriptor, into: buffer, target: path) }
        }
        let text = String(decoding: bytes[..<(try outcome.get())], as: UTF8.self)
        return String(text.prefix { $0 != "\n" })
    }
}
