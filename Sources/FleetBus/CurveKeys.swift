import CZeroMQ

/// A CURVE public key: 32 bytes, written as 40 Z85 characters in files and logs.
public struct CurvePublicKey: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        self.bytes = bytes
    }

    public init?(z85 text: String) {
        guard let bytes = Z85.decode(text), bytes.count == 32 else { return nil }
        self.bytes = bytes
    }

    public var z85: String { Z85.encode(bytes) }
    public var description: String { z85 }
    /// A short form for tables and audit lines (the first 8 Z85 characters).
    public var fingerprint: String { String(z85.prefix(8)) }
}

/// A CURVE key pair. The secret half never appears in a description, a log or an error.
public struct CurveKeyPair: Sendable, CustomStringConvertible {
    public let publicKey: CurvePublicKey
    let secret: [UInt8]

    /// A fresh key pair from libzmq (libsodium's randomness underneath).
    public static func generate() throws(CurveKeyError) -> CurveKeyPair {
        var publicText = [CChar](repeating: 0, count: 41)
        var secretText = [CChar](repeating: 0, count: 41)
        guard zmq_curve_keypair(&publicText, &secretText) == 0 else { throw .unavailable }
        let secret = Z85.decode(String(cString: secretText))
        guard let secret, let pair = CurveKeyPair(secretBytes: secret) else { throw .unavailable }
        return pair
    }

    /// The pair for a secret key (the public half is derived from it).
    public init?(secretBytes: [UInt8]) {
        guard secretBytes.count == 32 else { return nil }
        let secretText = Z85.encode(secretBytes)
        var publicText = [CChar](repeating: 0, count: 41)
        guard zmq_curve_public(&publicText, secretText) == 0,
            let publicKey = CurvePublicKey(z85: String(cString: publicText))
        else { return nil }
        self.publicKey = publicKey
        secret = secretBytes
    }

    public init?(secretZ85 text: String) {
        guard let bytes = Z85.decode(text) else { return nil }
        self.init(secretBytes: bytes)
    }

    public var secretZ85: String { Z85.encode(secret) }
    public var secretBytes: [UInt8] { secret }
    public var description: String { "CurveKeyPair(public \(publicKey.z85))" }
}

public enum CurveKeyError: Error, CustomStringConvertible, Sendable {
    case unavailable

    public var description: String {
        "cannot make a CURVE key pair: this libzmq was built without CURVE (libsodium). Install Debian's libzmq5, which has it."
    }
}

/// ZeroMQ's Z85 encoding (RFC 32/Z85): 5 characters per 4 bytes.
public enum Z85 {
    public static func encode(_ bytes: [UInt8]) -> String {
        precondition(bytes.count % 4 == 0, "Z85 encodes whole 4-byte groups")
        var text = [CChar](repeating: 0, count: bytes.count * 5 / 4 + 1)
        _ = zmq_z85_encode(&text, bytes, bytes.count)
        return String(cString: text)
    }

    public static func decode(_ text: String) -> [UInt8]? {
        guard !text.isEmpty, text.utf8.count % 5 == 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: text.utf8.count * 4 / 5)
        guard zmq_z85_decode(&bytes, text) != nil else { return nil }
        // libzmq accepts characters outside the alphabet as if they were valid digits.
        guard Z85.encode(bytes) == text else { return nil }
        return bytes
    }
}

extension ZMQSocket {
    /// Makes this socket a CURVE server: peers must know `keys.publicKey`, and the ZAP
    /// handler decides who gets in under `domain`. Set before bind.
    public func makeCurveServer(keys: CurveKeyPair, domain: String) throws(ZMQError) {
        try setOption(ZMQ_CURVE_SERVER, Int32(1))
        try setOption(ZMQ_CURVE_SECRETKEY, bytes: keys.secret)
        try setOption(ZMQ_ZAP_DOMAIN, bytes: Array(domain.utf8))
    }

    /// Makes this socket a CURVE client of the server with `serverKey`. Set before connect.
    public func makeCurveClient(serverKey: CurvePublicKey, keys: CurveKeyPair) throws(ZMQError) {
        try setOption(ZMQ_CURVE_SERVERKEY, bytes: serverKey.bytes)
        try setOption(ZMQ_CURVE_PUBLICKEY, bytes: keys.publicKey.bytes)
        try setOption(ZMQ_CURVE_SECRETKEY, bytes: keys.secret)
    }
}
