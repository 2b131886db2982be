import CCrypto

/// Why a certificate and key cannot serve HTTPS, in OpenSSL's words.
public struct TLSContextError: Error, CustomStringConvertible {
    public var description: String
}

/// A server's TLS settings with OpenSSL (Debian's libssl): its certificate chain and private
/// key from PEM files, TLS 1.2 or newer. Loaded once; every connection is made from it.
/// OpenSSL allows `SSL_new` on a configured context from any thread, so it is shared.
final class TLSContext: @unchecked Sendable {
    let context: OpaquePointer

    /// Loads `certificatePath` (the chain, leaf first) and `keyPath` (an unencrypted key) and
    /// checks that they belong together.
    init(certificatePath: String, keyPath: String) throws(TLSContextError) {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_server_method()) else {
            throw TLSContextError(description: "cannot make a TLS context: \(Self.openSSLErrors())")
        }
        self.context = context
        // Older protocol versions have known weaknesses; every current browser and curl speak 1.2 and 1.3.
        guard SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil) == 1 else {
            throw TLSContextError(description: "cannot require TLS 1.2: \(Self.openSSLErrors())")
        }
        // Renegotiation is a denial-of-service lever, and nothing here needs it
        // (SSL_OP_NO_RENEGOTIATION, bit 30: a macro Swift cannot import).
        SSL_CTX_set_options(context, UInt64(1) << 30)
        guard SSL_CTX_use_certificate_chain_file(context, certificatePath) == 1 else {
            throw TLSContextError(description: "cannot read the certificate chain: \(Self.openSSLErrors())")
        }
        guard SSL_CTX_use_PrivateKey_file(context, keyPath, SSL_FILETYPE_PEM) == 1 else {
            throw TLSContextError(description: "cannot read the private key (PEM, unencrypted): \(Self.openSSLErrors())")
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw TLSContextError(description: "the private key does not match the certificate: \(Self.openSSLErrors())")
        }
    }

    deinit { SSL_CTX_free(context) }

    /// OpenSSL's queued errors of this thread, oldest first, as one line (and clears them).
    static func openSSLErrors() -> String {
        var lines: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            var text = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &text, text.count)
            lines.append(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return lines.isEmpty ? "no detail from OpenSSL" : lines.joined(separator: "; ")
    }
}
