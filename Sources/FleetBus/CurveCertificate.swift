import FleetSystem
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A key file in ZeroMQ's certificate format (czmq's ZPL text, which pyzmq's
/// `zmq.auth.load_certificate` also reads): a `metadata` section of quoted name/value
/// pairs and a `curve` section with the Z85 keys. A public certificate has no secret key.
public struct CurveCertificate: Sendable {
    public var publicKey: CurvePublicKey
    public var keys: CurveKeyPair?
    public var metadata: [(name: String, value: String)]

    public init(keys: CurveKeyPair, metadata: [(name: String, value: String)] = []) {
        publicKey = keys.publicKey
        self.keys = keys
        self.metadata = metadata
    }

    public init(publicKey: CurvePublicKey, metadata: [(name: String, value: String)] = []) {
        self.publicKey = publicKey
        keys = nil
        self.metadata = metadata
    }

    public subscript(name: String) -> String? {
        get { metadata.first { $0.name == name }?.value }
        set {
            metadata.removeAll { $0.name == name }
            if let newValue { metadata.append((name, newValue)) }
        }
    }

    /// The file's text. `title` goes in the opening comment.
    public func text(title: String) -> String {
        var lines = ["#   ****  \(title)  ****"]
        if keys != nil { lines.append("#   Secret: whoever holds this file holds this key. Keep it mode 0600.") }
        lines.append("metadata")
        for (name, value) in metadata { lines.append("    \(name) = \"\(value)\"") }
        lines.append("curve")
        lines.append("    public-key = \"\(publicKey.z85)\"")
        if let keys { lines.append("    secret-key = \"\(keys.secretZ85)\"") }
        return lines.joined(separator: "\n") + "\n"
    }

    public init(text: String, path: String) throws(CurveCertificateError) {
        var section = ""
        var metadata: [(String, String)] = []
        var publicText: String?
        var secretText: String?
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard raw.first == " " || raw.first == "\t" else {
                section = line
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw .malformed(path: path, line: number + 1, reason: "expected name = \"value\"")
            }
            let name = line[..<equals].trimmingCharacters(in: .whitespaces)
            var value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            switch (section, name) {
            case ("curve", "public-key"): publicText = value
            case ("curve", "secret-key"): secretText = value
            case ("metadata", _): metadata.append((name, value))
            default: continue
            }
        }
        guard let publicText else { throw .malformed(path: path, line: 0, reason: "no curve public-key") }
        guard let publicKey = CurvePublicKey(z85: publicText) else {
            throw .malformed(path: path, line: 0, reason: "public-key is not 40 Z85 characters")
        }
        self.publicKey = publicKey
        self.metadata = metadata
        if let secretText {
            guard let keys = CurveKeyPair(secretZ85: secretText) else {
                throw .malformed(path: path, line: 0, reason: "secret-key is not 40 Z85 characters")
            }
            guard keys.publicKey == publicKey else {
                throw .malformed(path: path, line: 0, reason: "secret-key does not belong to public-key")
            }
            self.keys = keys
        } else {
            keys = nil
        }
    }

    public static func load(path: String) throws(CurveCertificateError) -> CurveCertificate {
        guard let text = try? SecretFile.read(path: path) else { throw .unreadable(path: path, errno: errno) }
        return try CurveCertificate(text: text, path: path)
    }

    /// Writes the file only if none is there yet (see `SecretFile.create`); false if one was.
    public func create(path: String, title: String) throws(CurveCertificateError) -> Bool {
        do {
            return try SecretFile.create(text(title: title), path: path)
        } catch {
            throw .unwritable(path: path, errno: error.errno)
        }
    }

    /// Writes the file mode 0600 (temporary name, fsync, rename), its directory 0700 if new.
    public func save(path: String, title: String) throws(CurveCertificateError) {
        do {
            try SecretFile.write(text(title: title), path: path)
        } catch {
            throw .unwritable(path: path, errno: error.errno)
        }
    }
}

public enum CurveCertificateError: Error, CustomStringConvertible, Sendable {
    case unreadable(path: String, errno: Int32)
    case unwritable(path: String, errno: Int32)
    case malformed(path: String, line: Int, reason: String)

    public var description: String {
        switch self {
        case let .unreadable(path, code):
            "cannot read the key file \(path): \(String(cString: strerror(code)))"
        case let .unwritable(path, code):
            "cannot write the key file \(path): \(String(cString: strerror(code))). Check that its directory is writable by this user."
        case let .malformed(path, line, reason):
            "the key file \(path) is not a ZeroMQ certificate\(line > 0 ? " (line \(line))" : ""): \(reason)"
        }
    }
}

public struct SecretFileError: Error, Sendable {
    public let errno: Int32
}

/// Files that hold secrets: written mode 0600 in a 0700 directory, never half-written.
public enum SecretFile {
    /// Writes `text` to `path` only if nothing is there yet, atomically even against other
    /// processes (temporary file, then link(2), which fails if the name exists). Returns false
    /// when another writer got there first.
    public static func create(_ text: String, path: String) throws(SecretFileError) -> Bool {
        let temporary = path + ".new-\(getpid())"
        try write(text, path: temporary)
        defer { unlink(temporary) }
        if link(temporary, path) == 0 { return true }
        if errno == EEXIST { return false }
        throw SecretFileError(errno: errno)
    }

    public static func write(_ text: String, path: String) throws(SecretFileError) {
        let directory = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        try makeDirectory(directory.isEmpty ? "/" : directory)
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SecretFileError(errno: errno) }
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            do {
                written += try systemCall("write", on: temporary) { bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } }
            } catch {
                close(fd)
                unlink(temporary)
                throw SecretFileError(errno: error.errno)
            }
        }
        // The umask may have narrowed it further, never widened it; make it exactly 0600.
        fchmod(fd, 0o600)
        let synced = fsync(fd) == 0
        let code = errno
        close(fd)
        guard synced else { unlink(temporary); throw SecretFileError(errno: code) }
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw SecretFileError(errno: code)
        }
    }

    public static func read(path: String) throws(SecretFileError) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SecretFileError(errno: errno) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n: Int
            do {
                n = try systemCall("read", on: path) { buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) } }
            } catch {
                throw SecretFileError(errno: error.errno)
            }
            if n == 0 { break }
            bytes += buffer[..<n]
            if bytes.count > 1 << 20 { throw SecretFileError(errno: EFBIG) }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Creates `path` and its parents; new directories are mode 0700.
    public static func makeDirectory(_ path: String) throws(SecretFileError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o700) != 0 && errno != EEXIST { throw SecretFileError(errno: errno) }
        }
    }
}
