import Hummingbird
import Logging
import Testing

@testable import FleetHTTP

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct HTTPPortReservationTests {
    /// Whether a plain socket (no address reuse) can bind 127.0.0.1:`port`.
    static func plainBindSucceeds(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    @Test func aReservedPort_isRefusedToOthers_andServedOnByTheServerStartedOnIt() async throws {
        let reservation = try HTTPPortReservation(host: "127.0.0.1", port: 0)
        #expect(reservation.port != 0)
        #expect(!Self.plainBindSucceeds(reservation.port), "nothing else binds a held port")
        let router = Router(context: WebRequestContext.self)
        router.get("/held") { _, _ in "served" }
        let server = try await WebServer.start(on: reservation, router: router, logger: Logger(label: "test"))
        #expect(server.port == reservation.port)
        #expect(!Self.plainBindSucceeds(reservation.port))
        try await server.stop()
    }

    @Test func aPortInUse_isRefusedAtReservation_sayingSo() async throws {
        let first = try HTTPPortReservation(host: "127.0.0.1", port: 0)
        let router = Router(context: WebRequestContext.self)
        let server = try await WebServer.start(on: first, router: router, logger: Logger(label: "test"))
        #expect(throws: WebServerError.portInUse(host: "127.0.0.1", port: first.port)) {
            try HTTPPortReservation(host: "127.0.0.1", port: first.port)
        }
        try await server.stop()
    }
}
