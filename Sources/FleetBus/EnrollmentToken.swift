/// A one-time enrollment token as an admin hands it to an agent: the secret half of a
/// CURVE key pair made for this token alone, and the coordinator's public key, so that the
/// agent can check it is talking to the right coordinator before it says anything.
/// Written `cfe1_` + base64url (no padding): safe to paste into a shell.
public struct EnrollmentToken: Sendable, CustomStringConvertible {
    public static let prefix = "cfe1_"
    public let keys: CurveKeyPair
    public let coordinatorKey: CurvePublicKey

    public init(keys: CurveKeyPair, coordinatorKey: CurvePublicKey) {
        self.keys = keys
        self.coordinatorKey = coordinatorKey
    }

    public init(text: String) throws(EnrollmentTokenError) {
        let trimmed = text.filter { !$0.isWhitespace }
        guard trimmed.hasPrefix(Self.prefix) else { throw .malformed("it does not start with \(Self.prefix)") }
        guard let bytes = Base64URL.decode(String(trimmed.dropFirst(Self.prefix.count))), bytes.count == 64 else {
            throw .malformed("it is not 64 bytes of base64url after \(Self.prefix); was it cut short when copied?")
        }
        guard let keys = CurveKeyPair(secretBytes: Array(bytes[0..<32])),
            let coordinatorKey = CurvePublicKey(bytes: Array(bytes[32..<64]))
        else { throw .malformed("its keys are invalid") }
        self.keys = keys
        self.coordinatorKey = coordinatorKey
    }

    public var text: String { Self.prefix + Base64URL.encode(keys.secretBytes + coordinatorKey.bytes) }
    /// Never the token itself: it is a secret until it is used.
    public var description: String { "EnrollmentToken(\(keys.publicKey.fingerprint)…)" }
}

public enum EnrollmentTokenError: Error, CustomStringConvertible, Sendable {
    case malformed(String)

    public var description: String {
        switch self {
        case let .malformed(reason): "this is not an enrollment token: \(reason). Copy it again from `capfleet enroll`."
        }
    }
}

/// RFC 4648 §5 base64url without padding.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var value: UInt32 = 0
            for (offset, byte) in chunk.enumerated() { value |= UInt32(byte) << (16 - 8 * offset) }
            for position in 0...chunk.count { out.append(alphabet[Int((value >> (18 - 6 * position)) & 63)]) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        for character in text.utf8 {
            guard let value = alphabet.firstIndex(of: character) else { return nil }
            values.append(UInt8(value))
        }
        guard values.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        var index = 0
        while index < values.count {
            let chunk = values[index..<min(index + 4, values.count)]
            var value: UInt32 = 0
            for (offset, digit) in chunk.enumerated() { value |= UInt32(digit) << (18 - 6 * offset) }
            for position in 0..<(chunk.count - 1) { out.append(UInt8((value >> (16 - 8 * position)) & 0xFF)) }
            index += 4
        }
        // Reject non-canonical trailing bits so one token has exactly one spelling.
        guard encode(out) == text else { return nil }
        return out
    }
}
