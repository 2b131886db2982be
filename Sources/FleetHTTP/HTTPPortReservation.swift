#if canImport(Glibc)
    import Glibc
#endif

/// An HTTP port held before its server starts, so that what the server will serve can be
/// told the port first (the coordinator's operator door says it in `who_am_i`, and the
/// dashboard on that port serves the door: the port comes first, then the door, then the
/// server, with no part set after it was made).
///
/// The port is held by a socket bound with SO_REUSEADDR and never listening: on Linux no
/// other socket can bind it meanwhile, except one that also asks for address reuse while
/// none listens — which the server, started with `WebServer.start(reserved:…)`, is.
public final class HTTPPortReservation: Sendable {
    public let host: String
    /// The port held (the one the kernel chose when 0 was asked).
    public let port: UInt16
    private let descriptor: Int32

    /// Binds `host:port` as the server will (the host's first address); port 0 picks one.
    public init(host: String, port: UInt16) throws(WebServerError) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE
        var found: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(host, String(port), &hints, &found)
        guard resolved == 0, let first = found else {
            throw .cannotServe(host: host, port: port, detail: "cannot resolve \(host): \(String(cString: gai_strerror(resolved)))")
        }
        defer { freeaddrinfo(found) }
        let descriptor = socket(first.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else {
            throw .cannotServe(host: host, port: port, detail: "cannot open a socket: \(String(cString: strerror(errno)))")
        }
        var one: Int32 = 1
        guard setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size)) == 0,
            bind(descriptor, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0
        else {
            let code = errno
            close(descriptor)
            if code == EADDRINUSE { throw .portInUse(host: host, port: port) }
            throw .cannotServe(host: host, port: port, detail: "cannot bind: \(String(cString: strerror(code)))")
        }
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard named == 0 else {
            let code = errno
            close(descriptor)
            throw .cannotServe(host: host, port: port, detail: "cannot read the bound port: \(String(cString: strerror(code)))")
        }
        // sin_port and sin6_port sit at the same offset, in network byte order.
        let boundPort = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
        self.host = host
        self.port = boundPort
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }
}
