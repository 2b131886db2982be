import CZeroMQ

/// A libzmq context. Contexts are thread-safe; one per process is enough.
public final class ZMQContext: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer

    public let ioThreads: Int32

    public init(ioThreads: Int32 = 1) {
        self.ioThreads = ioThreads
        handle = zmq_ctx_new()
        zmq_ctx_set(handle, ZMQ_IO_THREADS, ioThreads)
        // Sockets are few; raise the limit so large test fleets never hit it.
        zmq_ctx_set(handle, ZMQ_MAX_SOCKETS, 4096)
    }

    /// A context whose two I/O threads keep bulk traffic (frames, CURVE-encrypted a
    /// megabyte at a time) and control traffic (heartbeats, commands, requests) apart, so a
    /// busy frame path never delays a heartbeat. Put each socket in its lane with
    /// `ZMQSocket.use(_:)` before it connects or binds.
    public static func withSeparateLanes() -> ZMQContext { ZMQContext(ioThreads: 2) }

    /// Whether libzmq was built with CURVE security (Debian's is).
    public static var hasCurve: Bool { zmq_has("curve") == 1 }

    public static var libraryVersion: String {
        var major: Int32 = 0, minor: Int32 = 0, patch: Int32 = 0
        zmq_version(&major, &minor, &patch)
        return "\(major).\(minor).\(patch)"
    }

    deinit { zmq_ctx_term(handle) }
}
