import HummingbirdCore
import Logging
import NIOCore

/// An HTTP server's connections over TLS: each accepted connection gets a `TLSServerHandler`
/// first in its pipeline, then the HTTP (and WebSocket) handlers of `base`, which see only
/// plaintext.
struct TLSServerChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value

    let base: Base
    let tls: TLSContext

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(TLSServerHandler(context: tls, logger: logger))
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// `base`'s HTTP (and WebSocket) connections, over TLS with `tls`.
    static func tls(
        _ base: @escaping @Sendable (@escaping HTTPChannelHandler.Responder) -> any ServerChildChannel, context tls: TLSContext
    ) -> HTTPServerBuilder {
        .init { responder in
            func wrap(_ channel: some ServerChildChannel) -> any ServerChildChannel { TLSServerChannel(base: channel, tls: tls) }
            return wrap(base(responder))
        }
    }
}
