import CZeroMQ

/// One received message part, owning its libzmq buffer so large payloads are never copied.
/// Immutable once received, so it may be handed to other threads.
public final class ZMQMessage: @unchecked Sendable {
    let message: UnsafeMutablePointer<zmq_msg_t>

    init() {
        message = .allocate(capacity: 1)
        zmq_msg_init(message)
    }

    deinit {
        zmq_msg_close(message)
        message.deallocate()
    }

    public var count: Int { zmq_msg_size(message) }

    public var hasMore: Bool { zmq_msg_more(message) == 1 }

    /// Read-only view of the bytes; valid while this object is alive, which an optimised build
    /// ends at its last use: keep the message in use (or `withExtendedLifetime`) while reading.
    public var bytes: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: zmq_msg_data(message), count: count)
    }

    public var array: [UInt8] { [UInt8](bytes) }

    /// The TCP peer's address ("Peer-Address" metadata), when the transport has one.
    public var peerAddress: String? {
        guard let value = zmq_msg_gets(message, "Peer-Address") else { return nil }
        return String(cString: value)
    }

    /// Who the ZAP handler said the sender is ("User-Id"), for CURVE connections.
    public var userID: String? {
        guard let value = zmq_msg_gets(message, "User-Id") else { return nil }
        return String(cString: value)
    }

    /// Whether "User-Id" starts with `prefix`, read where libzmq keeps it: an endpoint that
    /// checks only the kind of sender, many times a second, need not copy it into a String.
    public func userID(hasPrefix prefix: StaticString) -> Bool {
        guard let value = zmq_msg_gets(message, "User-Id") else { return false }
        // A shorter value ends in its NUL, which differs from every byte of a prefix: the loop
        // never reads past it.
        return prefix.withUTF8Buffer { expected in
            expected.indices.allSatisfy { UInt8(bitPattern: value[$0]) == expected[$0] }
        }
    }

    /// The file descriptor of the connection the message came in on (ZMQ_SRCFD), so a
    /// revoked peer's connection can be shut down; -1 when unknown.
    public var sourceFD: Int32 { zmq_msg_get(message, ZMQ_SRCFD) }
}
