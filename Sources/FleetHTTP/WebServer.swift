import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#endif

public enum WebServerError: Error, CustomStringConvertible, Equatable {
    case portInUse(host: String, port: UInt16)
    case cannotServe(host: String, port: UInt16, detail: String)
    case unusableTLSFiles(certificate: String, key: String, detail: String)

    public var description: String {
        switch self {
        case let .portInUse(host, port):
            "cannot serve HTTP on \(host):\(port): the port is in use. Stop what holds it or choose another port."
        case let .cannotServe(host, port, detail):
            "cannot serve HTTP on \(host):\(port): \(detail)"
        case let .unusableTLSFiles(certificate, key, detail):
            "cannot serve HTTPS with the certificate \(certificate) and key \(key): \(detail). Give PEM files: the certificate chain (http_tls_cert) and its unencrypted private key (http_tls_key)"
        }
    }
}

/// An HTTP server on Hummingbird (SwiftNIO's event loops, not a thread of ours): started with
/// its port bound, so a port in use is an error at start rather than a log line later, and
/// stopped gracefully (requests under way are answered first).
public final class WebServer: Sendable {
    /// The port actually bound (useful with port 0).
    public let port: UInt16
    private let group: ServiceGroup
    private let serving: Task<Void, any Error>

    private init(port: UInt16, group: ServiceGroup, serving: Task<Void, any Error>) {
        self.port = port
        self.group = group
        self.serving = serving
    }

    /// Binds `host:port` and serves `router` until `stop`; over TLS with `tls`'s files.
    public static func start<Context: RequestContext>(
        host: String, port: UInt16, tls: TLSFiles? = nil, router: Router<Context>, logger: Logger
    )
        async throws(WebServerError) -> WebServer where Context.Source == ApplicationRequestContextSource
    {
        try await start(host: host, port: port, tls: tls, connection: { HTTP1Channel(responder: $0) }, router: router, logger: logger)
    }

    /// The same, with the router's `ws` routes upgraded to WebSockets.
    public static func start<Context: WebSocketRequestContext & RequestContext>(
        host: String, port: UInt16, tls: TLSFiles? = nil,
        router: Router<Context>, logger: Logger
    )
        async throws(WebServerError) -> WebServer where Context.Source == ApplicationRequestContextSource
    {
        let webSocketResponder = router.buildResponder()
        return try await start(
            host: host, port: port, tls: tls,
            connection: { HTTP1WebSocketUpgradeChannel(responder: $0, webSocketResponder: webSocketResponder, configuration: .init()) },
            router: router, logger: logger)
    }

    /// The same on a port held since before the router was made: the server binds it
    /// alongside the reservation, which its holder then lets go.
    public static func start<Context: WebSocketRequestContext & RequestContext>(
        on reservation: HTTPPortReservation, tls: TLSFiles? = nil, router: Router<Context>, logger: Logger
    )
        async throws(WebServerError) -> WebServer where Context.Source == ApplicationRequestContextSource
    {
        try await start(host: reservation.host, port: reservation.port, tls: tls, router: router, logger: logger)
    }

    private static func start<Context: RequestContext>(
        host: String, port: UInt16, tls: TLSFiles?,
        connection: @escaping @Sendable (@escaping HTTPChannelHandler.Responder) -> any ServerChildChannel,
        router: Router<Context>, logger: Logger
    )
        async throws(WebServerError) -> WebServer where Context.Source == ApplicationRequestContextSource
    {
        let server: HTTPServerBuilder
        if let tls {
            do {
                server = .tls(connection, context: try TLSContext(certificatePath: tls.certificatePath, keyPath: tls.keyPath))
            } catch {
                throw .unusableTLSFiles(certificate: tls.certificatePath, key: tls.keyPath, detail: error.description)
            }
        } else {
            server = HTTPServerBuilder { connection($0) }
        }
        let (bound, announce) = AsyncThrowingStream<UInt16, any Error>.makeStream()
        let application = Application(
            router: router,
            server: server,
            configuration: .init(address: .hostname(host, port: Int(port)), serverName: "CaptureFleet"),
            onServerRunning: { channel in
                announce.yield(UInt16(channel.localAddress?.port ?? 0))
            },
            logger: logger)
        let group = ServiceGroup(configuration: .init(services: [application], logger: logger))
        let serving = Task {
            do {
                try await group.run()
                announce.finish()
            } catch {
                announce.finish(throwing: error)
                throw error
            }
        }
        do {
            for try await boundPort in bound {
                return WebServer(port: boundPort, group: group, serving: serving)
            }
            throw WebServerError.cannotServe(host: host, port: port, detail: "the server ended before it was listening")
        } catch let error as WebServerError {
            throw error
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            throw .portInUse(host: host, port: port)
        } catch {
            throw .cannotServe(host: host, port: port, detail: "\(error)")
        }
    }

    /// Stops taking connections, answers what is under way, and returns once the server has
    /// ended; an error it ended with is thrown.
    public func stop() async throws {
        await group.triggerGracefulShutdown()
        try await serving.value
    }
}

/// A certificate chain and its private key, PEM files (as Let's Encrypt and most CAs give them).
public struct TLSFiles: Sendable, Equatable {
    public var certificatePath: String
    public var keyPath: String

    public init(certificatePath: String, keyPath: String) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
    }
}

/// A request for nothing served here is answered 404 with a line saying what is served,
/// rather than an empty body.
public struct ExplainedNotFound<Context: RequestContext>: RouterMiddleware {
    let explanation: String

    public init(_ explanation: String) { self.explanation = explanation }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            return Response(
                status: .notFound, headers: [.contentType: "text/plain; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: explanation + "\n")))
        }
    }
}

/// The request context of the coordinator's HTTP side: Hummingbird's basics, the peer's
/// address (which refusals are counted by), and what a WebSocket upgrade needs.
public struct WebRequestContext: RequestContext, RemoteAddressRequestContext, WebSocketRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    public let webSocket: WebSocketHandlerReference<Self>

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
        webSocket = .init()
    }

    /// The peer's IP address as text ("unknown" if the channel has none).
    public var peer: String { remoteAddress?.ipAddress ?? "unknown" }
}

extension HTTPField.Name {
    /// The header a dashboard page sends its session's CSRF token in.
    public static let captureFleetCSRF = HTTPField.Name("X-CaptureFleet-CSRF")!
}
