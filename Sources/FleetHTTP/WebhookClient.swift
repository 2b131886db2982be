#if canImport(Glibc)
import Glibc
#endif
import FleetSystem
import Foundation

/// An `http://` URL that must lead to this machine or its local network.
public struct LocalWebhookURL: Sendable, Equatable, CustomStringConvertible {
    public let host: String
    public let port: UInt16
    public let path: String

    public var description: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "http://\(shownHost):\(port)\(path)"
    }

    /// Reads `http://HOST[:PORT][/PATH]`. Plain HTTP only: alerts stay on the local network,
    /// where a webhook receiver (a chat bridge, a pager gateway) listens.
    public init(_ text: String) throws(WebhookError) {
        guard text.hasPrefix("http://") else { throw .unsupportedURL(text, "only http:// URLs on the local network are accepted") }
        let rest = text.dropFirst("http://".count)
        let authority = rest.prefix { $0 != "/" }
        let path = rest.dropFirst(authority.count)
        var host = Substring(authority)
        var port: UInt16 = 80
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw .unsupportedURL(text, "unclosed [ in the host") }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") {
                guard let parsed = UInt16(after.dropFirst()) else { throw .unsupportedURL(text, "the port is not a number") }
                port = parsed
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            guard let parsed = UInt16(authority[authority.index(after: colon)...]) else {
                throw .unsupportedURL(text, "the port is not a number")
            }
            port = parsed
        }
        guard !host.isEmpty, !host.contains("@") else { throw .unsupportedURL(text, "no host (user@ is not supported)") }
        self.host = String(host)
        self.port = port
        self.path = path.isEmpty ? "/" : String(path)
    }
}

public enum WebhookError: Error, CustomStringConvertible, Equatable {
    case unsupportedURL(String, String)
    case cannotResolve(host: String, detail: String)
    case notLocal(host: String, address: String)
    case connectionFailed(url: String, errno: Int32)
    case timedOut(url: String)
    case badResponse(url: String)
    case refused(url: String, status: Int)

    public var description: String {
        switch self {
        case let .unsupportedURL(url, why): "cannot use the webhook URL \(url): \(why)"
        case let .cannotResolve(host, detail): "cannot resolve the webhook host \(host): \(detail)"
        case let .notLocal(host, address):
            "the webhook host \(host) is \(address), outside this machine and its local network: alerts go only to loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7) or link-local addresses"
        case let .connectionFailed(url, code): "cannot reach the webhook \(url): \(String(cString: strerror(code)))"
        case let .timedOut(url): "the webhook \(url) did not answer in time"
        case let .badResponse(url): "the webhook \(url) answered something that is not HTTP"
        case let .refused(url, status): "the webhook \(url) answered HTTP \(status)"
        }
    }
}

/// Posts a body to a local webhook and waits for its status line. Blocking: call it from
/// a thread of your own (the coordinator's alert delivery thread does).
public enum WebhookClient {
    public static func post(_ body: [UInt8], contentType: String = "application/json", to url: LocalWebhookURL,
                            timeoutMilliseconds: Int32 = 3000) throws(WebhookError) -> Int {
        let address = try resolveLocal(url.host, port: url.port)
        let fd = socket(Int32(address.family), Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw .connectionFailed(url: url.description, errno: errno) }
        defer { close(fd) }
        let deadline = MonotonicClock.milliseconds() + Int64(timeoutMilliseconds)
        var storage = address.storage
        let connected = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, address.length) }
        }
        if connected != 0 {
            guard errno == EINPROGRESS else { throw .connectionFailed(url: url.description, errno: errno) }
            try wait(fd, for: Int16(POLLOUT), until: deadline, url: url)
            var code: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length)
            guard code == 0 else { throw .connectionFailed(url: url.description, errno: code) }
        }
        let hostHeader = url.host.contains(":") ? "[\(url.host)]:\(url.port)" : "\(url.host):\(url.port)"
        var request = Array(("POST \(url.path) HTTP/1.1\r\nHost: \(hostHeader)\r\nUser-Agent: capfleet\r\n"
            + "Content-Type: \(contentType)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n").utf8)
        request.append(contentsOf: body)
        var offset = 0
        while offset < request.count {
            try wait(fd, for: Int16(POLLOUT), until: deadline, url: url)
            do {
                offset += try systemCall("send", on: url.description) {
                    request.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
                }
            } catch where error.wouldBlock {
                continue
            } catch {
                throw .connectionFailed(url: url.description, errno: error.errno)
            }
        }
        // The status line is all we need.
        var answer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        while !answer.contains(10) {
            try wait(fd, for: Int16(POLLIN), until: deadline, url: url)
            let count: Int
            do {
                count = try systemCall("read", on: url.description) { read(fd, &chunk, chunk.count) }
            } catch where error.wouldBlock {
                continue
            } catch {
                break
            }
            guard count > 0 else { break }
            answer.append(contentsOf: chunk[0..<count])
        }
        let statusLine = String(decoding: answer.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self).split(separator: " ")
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), let status = Int(statusLine[1]) else {
            throw .badResponse(url: url.description)
        }
        guard (200..<300).contains(status) else { throw .refused(url: url.description, status: status) }
        return status
    }

    private static func wait(_ fd: Int32, for events: Int16, until deadline: Int64, url: LocalWebhookURL) throws(WebhookError) {
        while true {
            let remaining = deadline - MonotonicClock.milliseconds()
            guard remaining > 0 else { throw .timedOut(url: url.description) }
            var pfd = pollfd(fd: fd, events: events, revents: 0)
            let ready: Int32
            do {
                ready = try systemCall("poll", on: url.description) { poll(&pfd, 1, Int32(remaining)) }
            } catch {
                throw .connectionFailed(url: url.description, errno: error.errno)
            }
            if ready > 0 { return }
            throw .timedOut(url: url.description)
        }
    }

    public struct ResolvedAddress: Sendable {
        var family: Int32
        var storage: sockaddr_storage
        var length: socklen_t
    }

    /// Whether the URL's host resolves to a local address now: nil when it does, else why not.
    public static func localCheck(_ url: LocalWebhookURL) -> WebhookError? {
        do {
            _ = try resolveLocal(url.host, port: url.port)
            return nil
        } catch {
            return error
        }
    }

    /// The host's first address, refused unless it is loopback, private or link-local.
    public static func resolveLocal(_ host: String, port: UInt16) throws(WebhookError) -> ResolvedAddress {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(host, String(port), &hints, &list)
        guard resolved == 0, let first = list else {
            throw .cannotResolve(host: host, detail: String(cString: gai_strerror(resolved)))
        }
        defer { freeaddrinfo(list) }
        var storage = sockaddr_storage()
        memcpy(&storage, first.pointee.ai_addr, Int(first.pointee.ai_addrlen))
        let bytes: [UInt8] = withUnsafeBytes(of: &storage) { raw in
            if first.pointee.ai_family == AF_INET6 {
                Array(raw[8..<24])   // sin6_addr
            } else {
                Array(raw[4..<8])    // sin_addr
            }
        }
        guard LocalNetwork.contains(bytes) else {
            throw .notLocal(host: host, address: LocalNetwork.text(bytes))
        }
        return ResolvedAddress(family: first.pointee.ai_family, storage: storage, length: first.pointee.ai_addrlen)
    }
}

/// Which IP addresses count as "this machine or its local network".
public enum LocalNetwork {
    /// `address` is 4 (IPv4) or 16 (IPv6) bytes in network order.
    public static func contains(_ address: [UInt8]) -> Bool {
        if address.count == 4 {
            let (a, b) = (address[0], address[1])
            return a == 127 || a == 10 || (a == 172 && (16...31).contains(b)) || (a == 192 && b == 168) || (a == 169 && b == 254)
        }
        guard address.count == 16 else { return false }
        if address == [UInt8](repeating: 0, count: 15) + [1] { return true }                  // ::1
        if address[0] & 0xFE == 0xFC { return true }                                           // fc00::/7
        if address[0] == 0xFE && address[1] & 0xC0 == 0x80 { return true }                   // fe80::/10
        if address[0..<10].allSatisfy({ $0 == 0 }) && address[10] == 0xFF && address[11] == 0xFF {
            return contains(Array(address[12..<16]))                                           // ::ffff:a.b.c.d
        }
        return false
    }

    static func text(_ address: [UInt8]) -> String {
        if address.count == 4 { return address.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: address.count, by: 2).map { String(UInt16(address[$0]) << 8 | UInt16(address[$0 + 1]), radix: 16) }
            .joined(separator: ":")
    }
}
