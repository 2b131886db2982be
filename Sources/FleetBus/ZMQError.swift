import CZeroMQ

/// A failed libzmq call: which call, on what, and errno as libzmq reported it.
public struct ZMQError: Error, CustomStringConvertible, Sendable {
    public let call: String
    public let target: String
    public let errno: Int32

    public var description: String {
        let text = String(cString: zmq_strerror(errno))
        return "\(call) on \(target) failed: \(text) (errno \(errno))"
    }

    public var wouldBlock: Bool { errno == EAGAIN }
    public var contextTerminated: Bool { errno == ETERM }
}

/// Every libzmq call goes through here: reads errno at once, retries EINTR, and throws
/// a typed error naming the call (modelled on swift-nio's `syscall(blocking:where:)`).
@inline(__always)
@discardableResult
func zmqCall(_ call: String, on target: @autoclosure () -> String, _ body: () -> Int32) throws(ZMQError) -> Int32 {
    while true {
        let result = body()
        if result >= 0 { return result }
        let code = capfleet_errno()
        if code == EINTR { continue }
        throw ZMQError(call: call, target: target(), errno: code)
    }
}
