import Glibc

/// A failed system call: which call, on what, and errno as the kernel reported it. The
/// description derives from errno, so nobody needs to match words in it: ask `errno`.
public struct SystemCallError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The call, with the request where one call does many things ("ioctl(VIDIOC_DQBUF)").
    public let call: String
    /// What it was called on: a path, an address, a descriptor's purpose.
    public let target: String
    public let errno: Int32

    public init(call: String, target: String, errno: Int32) {
        self.call = call
        self.target = target
        self.errno = errno
    }

    public var description: String {
        "\(call) on \(target) failed: \(String(cString: strerror(errno))) (errno \(errno))"
    }

    public var wouldBlock: Bool { errno == EAGAIN || errno == EWOULDBLOCK }
}

/// Every direct system call goes through here (modelled on swift-nio's
/// `syscall(blocking:where:)`): reads errno at once, retries EINTR, and throws a typed error
/// naming the call. `body` returns the call's result; a negative result is a failure.
@inline(__always)
@discardableResult
public func systemCall<Result: BinaryInteger>(
    _ call: @autoclosure () -> String, on target: @autoclosure () -> String,
    _ body: () -> Result
) throws(SystemCallError) -> Result {
    while true {
        let result = body()
        if result >= 0 { return result }
        let code = Glibc.errno
        if code == EINTR { continue }
        throw SystemCallError(call: call(), target: target(), errno: code)
    }
}

/// For calls that return their error instead of setting errno (pthread_*, clock_nanosleep,
/// posix_fallocate): 0 is success, EINTR is retried, anything else thrown.
@inline(__always)
public func systemCallReturningError(
    _ call: @autoclosure () -> String, on target: @autoclosure () -> String,
    _ body: () -> Int32
) throws(SystemCallError) {
    while true {
        let code = body()
        if code == 0 { return }
        if code == EINTR { continue }
        throw SystemCallError(call: call(), target: target(), errno: code)
    }
}
