#if canImport(Glibc)
    import Glibc
#endif

public enum LoopbackPortsError: Error, CustomStringConvertible {
    case none(errno: Int32)

    public var description: String {
        switch self {
        case let .none(code): "cannot find a free port on 127.0.0.1: \(String(cString: strerror(code)))"
        }
    }
}

/// Ports on 127.0.0.1 that nothing listens on, for tests and benchmarks that start their own
/// coordinator. All are held until every one is found, so the list has no repeats; another
/// process may still take one before the caller binds it.
public enum LoopbackPorts {
    public static func free(_ count: Int) throws(LoopbackPortsError) -> [UInt16] {
        var sockets: [Int32] = []
        defer { sockets.forEach { close($0) } }
        var ports: [UInt16] = []
        for _ in 0..<count {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw .none(errno: errno) }
            sockets.append(fd)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
            }
            guard bound else { throw .none(errno: errno) }
            ports.append(UInt16(bigEndian: address.sin_port))
        }
        return ports
    }
}
