import CCrypto

/// Secrets a browser carries (a sign-in link's token, a session cookie, a CSRF token):
/// 32 random bytes from the kernel, written URL-safe, and kept by the coordinator only as
/// their SHA-256 so a copy of the fleet database signs nobody in.
public enum WebSecret {
    /// 256 bits from `SystemRandomNumberGenerator` (getrandom), base64url without padding.
    public static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return base64URL(bytes)
    }

    /// Lower-case hex SHA-256 of the secret's text.
    public static func hash(_ secret: String) -> String {
        let input = Array(secret.utf8)
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let done = input.withUnsafeBufferPointer { EVP_Digest($0.baseAddress, $0.count, &digest, &length, EVP_sha256(), nil) }
        // libcrypto's SHA-256 of memory cannot fail short of running out of memory.
        precondition(done == 1 && length == 32, "EVP_Digest(SHA-256) failed")
        let hex: [Character] = Array("0123456789abcdef")
        return String(digest.flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 0x0F)]] })
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        let alphabet: [Character] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        var text = ""
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            let value = chunk.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (16 - 8 * UInt32($1.offset)) }
            for position in 0...chunk.count { text.append(alphabet[Int((value >> (18 - 6 * UInt32(position))) & 0x3F)]) }
            index += 3
        }
        return text
    }
}
