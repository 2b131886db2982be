import CV4L2
import FleetSystem
import Glibc

/// A failed V4L2 call, naming the call, the device node and what the user can do.
public struct V4L2Error: Error, CustomStringConvertible, Sendable, Equatable {
    /// The system call that failed on the device node, with errno.
    public let cause: SystemCallError
    public var call: String { cause.call }
    public var path: String { cause.target }
    public var errno: Int32 { cause.errno }

    public init(call: String, path: String, errno: Int32) {
        cause = SystemCallError(call: call, target: path, errno: errno)
    }

    /// The same failure, from the system-call helper.
    public init(_ error: SystemCallError) {
        cause = error
    }

    /// The system call's own wording, and what the operator can do about it.
    public var description: String { "\(cause)\(hint)" }

    /// The device is gone (unplugged, or the driver unbound it).
    public var isDisconnect: Bool { errno == ENODEV || errno == ENXIO || errno == ENOENT }
    /// Another program holds the device.
    public var isBusy: Bool { errno == EBUSY }

    private var hint: String {
        switch errno {
        case EBUSY: "; another program is using the camera: close it, and capture resumes by itself"
        case ENODEV, ENXIO: "; the camera was unplugged: capture resumes when it is back"
        case ENOENT: "; there is no such device node: check the path, or whether the camera is plugged in"
        case EACCES, EPERM: "; permission denied: add the agent's user to the 'video' group"
        default: ""
        }
    }
}

/// An open V4L2 device node. Every ioctl goes through `ioctl(_:_:_:)` or `attempt`, on
/// `systemCall` (EINTR retried there), and failures become `V4L2Error`. Not thread-safe:
/// its owner serialises use.
final class V4L2Handle {
    let path: String
    let fd: Int32
    /// Through libv4l2 (video nodes, whose formats it may convert), or straight to the kernel
    /// (media controllers and sub-devices, which libv4l2's open refuses).
    let throughLibV4L2: Bool

    init(path: String, throughLibV4L2: Bool = true) throws(V4L2Error) {
        do throws(SystemCallError) {
            fd = try systemCall("open", on: path) {
                throughLibV4L2 ? capfleet_v4l2_open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC) : capfleet_kernel_open(path, O_RDWR | O_CLOEXEC)
            }
        } catch {
            throw V4L2Error(error)
        }
        self.path = path
        self.throughLibV4L2 = throughLibV4L2
    }

    deinit { _ = throughLibV4L2 ? capfleet_v4l2_close(fd) : close(fd) }

    func ioctl<Argument>(_ request: UInt, _ argument: inout Argument, _ call: String) throws(V4L2Error) {
        if let error = attempt(request, &argument) { throw V4L2Error(call: call, path: path, errno: error) }
    }

    /// Runs an ioctl and returns errno on failure, for calls where failure is an answer (end
    /// of an enumeration, an unsupported query).
    func attempt<Argument>(_ request: UInt, _ argument: inout Argument) -> Int32? {
        let fd = self.fd
        let library = throughLibV4L2
        do throws(SystemCallError) {
            _ = try withUnsafeMutablePointer(to: &argument) { (pointer) throws(SystemCallError) in
                try systemCall("ioctl", on: path) {
                    library ? capfleet_v4l2_ioctl(fd, request, pointer) : capfleet_kernel_ioctl(fd, request, pointer)
                }
            }
            return nil
        } catch {
            return error.errno
        }
    }
}

/// Reads a fixed-size, NUL-padded C string field (a Swift tuple of bytes).
func fixedString<T>(_ field: T) -> String {
    withUnsafeBytes(of: field) { raw in
        String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
    }
}
