import Synchronization

/// Where one socket of a loop is connected: the coordinator names its endpoints at every
/// WELCOME, and a socket follows them, leaving the old one for the new, on the loop's thread.
public final class SocketEndpoint: Sendable {
    private let current = Mutex<String?>(nil)

    public init() {}

    /// Connects `socket` of `loop` to `endpoint`, leaving the previous one, unless it is there
    /// already; `then` runs on the loop's thread afterwards in either case (a connection
    /// renewed, whatever its endpoint). `failed` hears why a connect was refused.
    public func move(
        _ socket: SocketLoop.SocketID, of loop: SocketLoop, to endpoint: String,
        failed: @escaping @Sendable (ZMQError) -> Void,
        then: (@Sendable (SocketLoop.Sockets) -> Void)? = nil
    ) {
        let previous = current.withLock { current -> String? in
            defer { current = endpoint }
            return current
        }
        guard previous != endpoint || then != nil else { return }
        loop.perform { sockets in
            if previous != endpoint {
                do throws(ZMQError) {
                    if let previous { try? sockets[socket].disconnect(previous) }
                    try sockets[socket].connect(endpoint)
                } catch {
                    failed(error)
                }
            }
            then?(sockets)
        }
    }
}
