import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Sends GigE Vision action commands (`GVCPActionCommand`) over UDP and gathers the cameras'
/// acknowledgements. Blocking (a send, then a wait of up to `timeout` for answers): called on
/// a thread its owner keeps for it, never the async pool.
public final class GVCPActionSender {
    private let socket: Int32
    /// Where the commands go: one camera's address, or a subnet's broadcast address for all.
    public let destination: String
    public let port: UInt16

    /// `destination` an IPv4 address (broadcast allowed); `port` GVCP's 3956 unless a test says otherwise.
    public init(destination: String, port: UInt16 = GVCPActionCommand.port) throws(GenICamError) {
        self.destination = destination
        self.port = port
        let made = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard made >= 0 else { throw Self.failure("opening a UDP socket", errno) }
        var on: Int32 = 1
        guard setsockopt(made, SOL_SOCKET, SO_BROADCAST, &on, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            let code = errno
            close(made)
            throw Self.failure("allowing broadcast", code)
        }
        socket = made
    }

    deinit { close(socket) }

    /// Sends `command`; with an acknowledgement asked for, the acknowledgements of its request
    /// that came within `timeout` (one per camera that acted on it), else none.
    public func send(_ command: GVCPActionCommand, timeout: Duration = .milliseconds(200)) throws(GenICamError) -> [GVCPActionCommand.Acknowledgement]
    {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, destination, &address.sin_addr) == 1 else {
            throw GenICamError(device: "action command", operation: "reading the address \(destination)", message: "not an IPv4 address")
        }
        let bytes = command.encoded
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(socket, bytes, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard sent == bytes.count else { throw Self.failure("sending to \(destination):\(port)", errno) }
        guard command.acknowledge else { return [] }
        var answers: [GVCPActionCommand.Acknowledgement] = []
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { break }
            var poller = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
            let ready = poll(&poller, 1, milliseconds)
            if ready < 0, errno == EINTR { continue }
            guard ready > 0 else { break }
            let count = recv(socket, &buffer, buffer.count, 0)
            guard count > 0 else { continue }
            if let answer = GVCPActionCommand.Acknowledgement(decoding: Array(buffer[0..<count])), answer.requestID == command.requestID {
                answers.append(answer)
            }
        }
        return answers
    }

    private static func failure(_ operation: String, _ code: Int32) -> GenICamError {
        GenICamError(device: "action command", operation: operation, message: String(cString: strerror(code)))
    }
}
