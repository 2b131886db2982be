import FleetSystem

#if canImport(Glibc)
    import Glibc
#endif

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
    case connectionFailed(url: String, detail: String)
    case timedOut(url: String)
    case refused(url: String, status: Int)

    public var description: String {
        switch self {
        case let .unsupportedURL(url, why): "cannot use the webhook URL \(url): \(why)"
        case let .cannotResolve(host, detail): "cannot resolve the webhook host \(host): \(detail)"
        case let .notLocal(host, address):
            "the webhook host \(host) is \(address), outside this machine and its local network: alerts go only to loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7) or link-local addresses"
        case let .connectionFailed(url, detail): "cannot reach the webhook \(url): \(detail)"
        case let .timedOut(url): "the webhook \(url) did not answer in time"
        case let .refused(url, status): "the webhook \(url) answered HTTP \(status)"
        }
    }
}

/// Posts a body to a local webhook over one plain HTTP/1.1 connection and waits for the
/// status line. Blocking: call it from a thread of your own (the coordinator's alert delivery
/// thread does), never from an event loop. A few dozen lines of sockets, where a general HTTP
/// client (and its HTTP/2 and TLS stacks) cost minutes of every build for one POST a minute.
public enum WebhookClient {
    public static func post(
        _ body: [UInt8], contentType: String = "application/json", to url: LocalWebhookURL,
        timeoutMilliseconds: Int64 = 3000
    ) throws(WebhookError) -> Int {
        // Resolved and checked here, then reached by that address: the host cannot resolve
        // elsewhere between the check and the connection.
        let address = try resolveLocal(url.host, port: url.port)
        let hostHeader = url.host.contains(":") ? "[\(url.host)]:\(url.port)" : "\(url.host):\(url.port)"
        let head =
            "POST \(url.path) HTTP/1.1\r\nHost: \(hostHeader)\r\nUser-Agent: capfleet\r\n"
            + "Content-Type: \(contentType)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        let deadline = ContinuousClock.now + .milliseconds(timeoutMilliseconds)
        let connection: WebhookConnection
        do {
            connection = try WebhookConnection(to: address, deadline: deadline)
        } catch {
            throw webhookError(error, url)
        }
        defer { connection.close() }
        let statusLine: String
        do {
            try connection.writeAll(Array(head.utf8) + body, deadline: deadline)
            statusLine = try connection.readStatusLine(deadline: deadline)
        } catch {
            throw webhookError(error, url)
        }
        // "HTTP/1.1 204 No Content"
        let words = statusLine.split(separator: " ", maxSplits: 2)
        guard words.count >= 2, words[0].hasPrefix("HTTP/1."), let status = Int(words[1]) else {
            throw .connectionFailed(url: url.description, detail: "the answer is not HTTP/1.x: \(statusLine.prefix(80))")
        }
        guard (200..<300).contains(status) else { throw .refused(url: url.description, status: status) }
        return status
    }

    static func webhookError(_ error: WebhookConnectionError, _ url: LocalWebhookURL) -> WebhookError {
        switch error {
        case .deadlinePassed: .timedOut(url: url.description)
        case let .failed(failure): .connectionFailed(url: url.description, detail: reason(failure))
        }
    }

    /// What went wrong in words: "connection refused" rather than an errno number.
    static func reason(_ error: SystemCallError) -> String {
        error.errno == 0 ? "the connection closed before an answer" : String(cString: strerror(error.errno)).lowercased()
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
                Array(raw[8..<24])  // sin6_addr
            } else {
                Array(raw[4..<8])  // sin_addr
            }
        }
        guard LocalNetwork.contains(bytes) else {
            throw .notLocal(host: host, address: LocalNetwork.text(bytes))
        }
        return ResolvedAddress(
            storage: storage, length: first.pointee.ai_addrlen, family: first.pointee.ai_family,
            text: LocalNetwork.text(bytes))
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
        if address == [UInt8](repeating: 0, count: 15) + [1] { return true }  // ::1
        if address[0] & 0xFE == 0xFC { return true }  // fc00::/7
        if address[0] == 0xFE && address[1] & 0xC0 == 0x80 { return true }  // fe80::/10
        if address[0..<10].allSatisfy({ $0 == 0 }) && address[10] == 0xFF && address[11] == 0xFF {
            return contains(Array(address[12..<16]))  // ::ffff:a.b.c.d
        }
        return false
    }

    static func text(_ address: [UInt8]) -> String {
        if address.count == 4 { return address.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: address.count, by: 2).map { String(UInt16(address[$0]) << 8 | UInt16(address[$0 + 1]), radix: 16) }
            .joined(separator: ":")
    }
}
