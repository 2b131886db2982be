#if canImport(Glibc)
import Glibc
#endif
import CPlatform
import FleetSystem
import Foundation
import Synchronization

/// What a client asked for. Header names are lower-cased.
public struct HTTPRequest: Sendable, Equatable {
    public var method: String
    /// The path without its query string.
    public var path: String
    public var query: String
    public var headers: [String: String]
    /// The body, as long as Content-Length said (no chunked uploads).
    public var body: [UInt8] = []
}

public struct HTTPResponse: Sendable {
    public var status: Int
    public var contentType: String
    public var body: [UInt8]

    public init(status: Int, contentType: String = "text/plain; charset=utf-8", body: [UInt8]) {
        self.status = status
        self.contentType = contentType
        self.body = body
    }

    public init(status: Int, text: String) {
        self.init(status: status, body: Array(text.utf8))
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 413: "Content Too Large"
        case 431: "Request Header Fields Too Large"
        default: "Status \(status)"
        }
    }
}

public enum HTTPServerError: Error, CustomStringConvertible, Equatable {
    case cannotResolve(host: String, detail: String)
    case cannotBind(host: String, port: UInt16, errno: Int32)

    public var description: String {
        switch self {
        case let .cannotResolve(host, detail):
            "cannot use \(host) as an HTTP listen address (\(detail)): give an IP address or a resolvable host name"
        case let .cannotBind(host, port, code) where code == EADDRINUSE:
            "cannot serve HTTP on \(host):\(port): the port is in use. Stop what holds it or choose another port."
        case let .cannotBind(host, port, code):
            "cannot serve HTTP on \(host):\(port): \(String(cString: strerror(code)))"
        }
    }
}

/// A small HTTP/1.1 server for scrapes (and, in tests, a webhook receiver): one thread it
/// owns blocks in `poll` on the listening socket, reads each request (headers and a
/// Content-Length body, under a short deadline), asks the handler for the answer and
/// closes the connection. Requests are served one at a time,
/// which is what a Prometheus scraper needs and keeps a slow client from costing threads.
public final class HTTPServer: Sendable {
    public typealias Handler = @Sendable (HTTPRequest) -> HTTPResponse

    /// The port actually bound (useful with port 0).
    public let port: UInt16
    private let listenFD: Int32
    private let wakeFDs: (read: Int32, write: Int32)
    private let handler: Handler
    private let stopped = Atomic<Bool>(false)
    private let thread = OwnedThread(name: "cf-http")
    static let maxHeaderBytes = 16 * 1024
    static let maxBodyBytes = 256 * 1024
    static let readDeadlineMilliseconds: Int32 = 2000

    public init(host: String, port: UInt16, handler: @escaping Handler) throws(HTTPServerError) {
        self.handler = handler
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE
        var list: UnsafeMutablePointer<addrinfo>?
        let bindHost = host == "*" ? nil : host
        let resolved = getaddrinfo(bindHost, String(port), &hints, &list)
        guard resolved == 0, let first = list else {
            throw .cannotResolve(host: host, detail: String(cString: gai_strerror(resolved)))
        }
        defer { freeaddrinfo(list) }
        // Prefer IPv4 for `*` so one socket serves the usual scrape addresses.
        var chosen = first
        if bindHost == nil {
            var candidate: UnsafeMutablePointer<addrinfo>? = first
            while let entry = candidate {
                if entry.pointee.ai_family == AF_INET { chosen = entry; break }
                candidate = entry.pointee.ai_next
            }
        }
        let fd = socket(chosen.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .cannotBind(host: host, port: port, errno: errno) }
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, chosen.pointee.ai_addr, chosen.pointee.ai_addrlen) == 0, listen(fd, 16) == 0 else {
            let code = errno
            close(fd)
            throw .cannotBind(host: host, port: port, errno: code)
        }
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.port = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
        listenFD = fd
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else {
            close(fd)
            throw .cannotBind(host: host, port: port, errno: errno)
        }
        for end in pipeFDs { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        wakeFDs = (pipeFDs[0], pipeFDs[1])
        thread.start { [self] in serve() }
    }

    /// Stops accepting and waits for the thread to finish the request in hand.
    public func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var byte: UInt8 = 1
        _ = write(wakeFDs.write, &byte, 1)
        thread.joinBlocking()
        close(listenFD)
        close(wakeFDs.read)
        close(wakeFDs.write)
    }

    private func serve() {
        var fds = [pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: wakeFDs.read, events: Int16(POLLIN), revents: 0)]
        while !stopped.load(ordering: .acquiring) {
            // poll fails only on a programming error (EFAULT, EINVAL) or no memory: nothing to serve then.
            guard (try? systemCall("poll", on: "the HTTP listener", { poll(&fds, 2, -1) })) != nil else { return }
            if fds[1].revents != 0 { return }
            guard fds[0].revents & Int16(POLLIN) != 0 else { continue }
            let client = accept(listenFD, nil, nil)
            guard client >= 0 else { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            respond(on: client)
            close(client)
        }
    }

    private func respond(on client: Int32) {
        let response: HTTPResponse
        switch readRequest(from: client) {
        case let .success(request):
            response = handler(request)
            send(response, headOnly: request.method == "HEAD", to: client)
        case let .failure(status):
            send(HTTPResponse(status: status.rawValue, text: "\(HTTPResponse.reason(status.rawValue))\n"), headOnly: false, to: client)
        }
    }

    private enum RequestProblem: Int, Error { case badRequest = 400, timeout = 408, bodyTooLarge = 413, tooLarge = 431 }

    private func readRequest(from client: Int32) -> Result<HTTPRequest, RequestProblem> {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        let deadline = MonotonicClock.milliseconds() + Int64(Self.readDeadlineMilliseconds)
        func readMore() -> RequestProblem? {
            let remaining = deadline - MonotonicClock.milliseconds()
            guard remaining > 0 else { return .timeout }
            var pfd = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            guard let ready = try? systemCall("poll", on: "an HTTP client", { poll(&pfd, 1, Int32(remaining)) }), ready > 0 else {
                return .timeout
            }
            let count = read(client, &chunk, chunk.count)
            guard count > 0 else { return .badRequest }
            buffer.append(contentsOf: chunk[0..<count])
            return nil
        }
        while HTTPRequestParser.headerEnd(in: buffer) == nil {
            guard buffer.count < Self.maxHeaderBytes else { return .failure(.tooLarge) }
            if let problem = readMore() { return .failure(problem) }
        }
        guard var request = HTTPRequestParser.parse(buffer), let end = HTTPRequestParser.headerEnd(in: buffer) else {
            return .failure(.badRequest)
        }
        let length = request.headers["content-length"].flatMap { Int($0) } ?? 0
        guard length >= 0 else { return .failure(.badRequest) }
        guard length <= Self.maxBodyBytes else { return .failure(.bodyTooLarge) }
        while buffer.count - end < length {
            if let problem = readMore() { return .failure(problem) }
        }
        request.body = Array(buffer[end..<(end + length)])
        return .success(request)
    }

    private func send(_ response: HTTPResponse, headOnly: Bool, to client: Int32) {
        let head = "HTTP/1.1 \(response.status) \(HTTPResponse.reason(response.status))\r\n"
            + "Content-Type: \(response.contentType)\r\n"
            + "Content-Length: \(response.body.count)\r\n"
            + "Connection: close\r\n\r\n"
        var bytes = Array(head.utf8)
        if !headOnly { bytes.append(contentsOf: response.body) }
        var offset = 0
        while offset < bytes.count {
            // A client that hung up gets nothing more; the next request is served as usual.
            guard let written = try? systemCall("send", on: "an HTTP client", {
                bytes.withUnsafeBytes { raw in Glibc.send(client, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL)) }
            }), written > 0 else { return }
            offset += written
        }
    }
}

/// Parses the head of an HTTP/1.x request.
enum HTTPRequestParser {
    /// Index just past the blank line that ends the headers, if it has arrived.
    static func headerEnd(in bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 3..<bytes.count where bytes[index] == 10 {
            if bytes[index - 1] == 13, bytes[index - 2] == 10, bytes[index - 3] == 13 { return index + 1 }
        }
        return nil
    }

    static func parse(_ bytes: [UInt8]) -> HTTPRequest? {
        guard let end = headerEnd(in: bytes),
              let text = String(bytes: bytes[0..<end], encoding: .utf8) else { return nil }
        let lines = text.components(separatedBy: "\r\n")
        let requestLine = lines[0].split(separator: " ", omittingEmptySubsequences: true)
        guard requestLine.count == 3, requestLine[2].hasPrefix("HTTP/1.") else { return nil }
        let target = String(requestLine[1])
        guard target.hasPrefix("/") else { return nil }
        let pieces = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        var headers: [String: String] = [:]
        for line in lines.dropFirst() where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return HTTPRequest(method: String(requestLine[0]), path: String(pieces[0]),
                           query: pieces.count > 1 ? String(pieces[1]) : "", headers: headers)
    }
}

enum MonotonicClock {
    static func milliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}
