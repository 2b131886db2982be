import CCrypto
import Logging
import NIOCore

/// TLS on one accepted connection, first in its pipeline: ciphertext from the socket goes
/// into OpenSSL through a memory BIO and plaintext comes out to the HTTP handlers; their
/// plaintext goes in and ciphertext out to the socket. OpenSSL never touches the socket, so
/// everything runs on the channel's event loop without blocking.
final class TLSServerHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let connection: OpaquePointer
    /// Ciphertext from the peer, read by OpenSSL (owned by `connection`).
    private let incoming: OpaquePointer
    /// Ciphertext for the peer, written by OpenSSL (owned by `connection`).
    private let outgoing: OpaquePointer
    private let logger: Logger
    private var state = State.handshaking
    /// What the HTTP side wrote before the handshake ended, sent once it has.
    private var waitingWrites: [(ByteBuffer, EventLoopPromise<Void>?)] = []

    private enum State { case handshaking, open, closed }

    init(context tls: TLSContext, logger: Logger) throws(TLSContextError) {
        ERR_clear_error()
        guard let connection = SSL_new(tls.context), let incoming = BIO_new(BIO_s_mem()), let outgoing = BIO_new(BIO_s_mem()) else {
            throw TLSContextError(description: "cannot start a TLS connection: \(TLSContext.openSSLErrors())")
        }
        SSL_set_bio(connection, incoming, outgoing)
        SSL_set_accept_state(connection)
        self.connection = connection
        self.incoming = incoming
        self.outgoing = outgoing
        self.logger = logger
    }

    deinit { SSL_free(connection) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let ciphertext = unwrapInboundIn(data)
        guard state != .closed, ciphertext.readableBytes > 0 else { return }
        // A memory BIO grows as needed, so it takes all of it (short of memory).
        let taken = ciphertext.withUnsafeReadableBytes { BIO_write(incoming, $0.baseAddress, Int32($0.count)) }
        guard taken == ciphertext.readableBytes else {
            fail(context: context, "OpenSSL took \(taken) of \(ciphertext.readableBytes) bytes")
            return
        }
        if state == .handshaking {
            ERR_clear_error()
            let result = SSL_do_handshake(connection)
            if result == 1 {
                state = .open
            } else if SSL_get_error(connection, result) != SSL_ERROR_WANT_READ {
                fail(context: context, "TLS handshake failed: \(TLSContext.openSSLErrors())")
                return
            }
            sendCiphertext(context: context, promise: nil)
            if state == .open {
                for (plaintext, promise) in waitingWrites { encrypt(context: context, plaintext, promise: promise) }
                waitingWrites = []
            }
            context.flush()
            guard state == .open else { return }
        }
        readPlaintext(context: context)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let plaintext = unwrapOutboundIn(data)
        switch state {
        case .handshaking: waitingWrites.append((plaintext, promise))
        case .open: encrypt(context: context, plaintext, promise: promise)
        case .closed: promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // The TLS close alert tells the peer the response ended on purpose, not by truncation.
        if mode == .all, state == .open {
            ERR_clear_error()
            SSL_shutdown(connection)
            sendCiphertext(context: context, promise: nil)
            context.flush()
        }
        if mode == .all { closeWrites() }
        context.close(mode: mode, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeWrites()
        context.fireChannelInactive()
    }

    /// Plaintext OpenSSL has decrypted, passed on until it wants more ciphertext.
    private func readPlaintext(context: ChannelHandlerContext) {
        while state == .open {
            var plaintext = context.channel.allocator.buffer(capacity: 16_384)
            ERR_clear_error()
            var result: Int32 = 0
            plaintext.writeWithUnsafeMutableBytes(minimumWritableBytes: 16_384) { bytes in
                result = SSL_read(connection, bytes.baseAddress, Int32(bytes.count))
                return max(0, Int(result))
            }
            if result > 0 {
                context.fireChannelRead(wrapInboundOut(plaintext))
                continue
            }
            switch SSL_get_error(connection, result) {
            case SSL_ERROR_WANT_READ:
                // Anything OpenSSL answered on its own (session tickets, alerts) goes out.
                sendCiphertext(context: context, promise: nil)
                context.flush()
                return
            case SSL_ERROR_ZERO_RETURN:
                // The peer closed TLS; close the connection after what it sent.
                closeWrites()
                context.close(promise: nil)
            default:
                fail(context: context, "TLS read failed: \(TLSContext.openSSLErrors())")
            }
        }
    }

    private func encrypt(context: ChannelHandlerContext, _ plaintext: ByteBuffer, promise: EventLoopPromise<Void>?) {
        guard plaintext.readableBytes > 0 else {
            context.write(wrapOutboundOut(plaintext), promise: promise)
            return
        }
        ERR_clear_error()
        let result = plaintext.withUnsafeReadableBytes { SSL_write(connection, $0.baseAddress, Int32($0.count)) }
        // Into a memory BIO a write is whole or an error: it never waits for the socket.
        guard result == plaintext.readableBytes else {
            let detail = TLSContext.openSSLErrors()
            promise?.fail(TLSContextError(description: "TLS write failed: \(detail)"))
            fail(context: context, "TLS write failed: \(detail)")
            return
        }
        sendCiphertext(context: context, promise: promise)
    }

    /// Writes what OpenSSL produced for the peer; `promise` completes with that write.
    private func sendCiphertext(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        let pending = BIO_ctrl_pending(outgoing)
        guard pending > 0 else {
            promise?.succeed()
            return
        }
        var ciphertext = context.channel.allocator.buffer(capacity: pending)
        ciphertext.writeWithUnsafeMutableBytes(minimumWritableBytes: pending) { bytes in
            Int(max(0, BIO_read(outgoing, bytes.baseAddress, Int32(pending))))
        }
        context.write(wrapOutboundOut(ciphertext), promise: promise)
    }

    private func fail(context: ChannelHandlerContext, _ reason: String) {
        logger.debug("closing an HTTPS connection", metadata: ["reason": "\(reason)"])
        sendCiphertext(context: context, promise: nil)
        context.flush()
        closeWrites()
        context.close(promise: nil)
    }

    private func closeWrites() {
        state = .closed
        let waiting = waitingWrites
        waitingWrites = []
        for (_, promise) in waiting { promise?.fail(ChannelError.ioOnClosedChannel) }
    }
}
