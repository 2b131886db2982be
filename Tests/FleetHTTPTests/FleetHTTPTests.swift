import Foundation
import Hummingbird
import Logging
import NIOCore
import Synchronization
import Testing

@testable import FleetHTTP

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct LocalNetworkTests {
    @Test func loopbackPrivateAndLinkLocalAreLocal() {
        #expect(LocalNetwork.contains([127, 0, 0, 1]))
        #expect(LocalNetwork.contains([10, 1, 2, 3]))
        #expect(LocalNetwork.contains([172, 16, 0, 1]))
        #expect(LocalNetwork.contains([172, 31, 255, 1]))
        #expect(LocalNetwork.contains([192, 168, 1, 20]))
        #expect(LocalNetwork.contains([169, 254, 3, 4]))
        #expect(LocalNetwork.contains([UInt8](repeating: 0, count: 15) + [1]))
        #expect(LocalNetwork.contains([0xFD, 0x12] + [UInt8](repeating: 0, count: 14)))
        #expect(LocalNetwork.contains([0xFE, 0x80] + [UInt8](repeating: 0, count: 14)))
        #expect(LocalNetwork.contains([UInt8](repeating: 0, count: 10) + [0xFF, 0xFF, 192, 168, 0, 1]))
    }

    @Test func publicAddressesAreNot() {
        #expect(!LocalNetwork.contains([8, 8, 8, 8]))
        #expect(!LocalNetwork.contains([172, 32, 0, 1]))
        #expect(!LocalNetwork.contains([192, 169, 0, 1]))
        #expect(!LocalNetwork.contains([0x20, 0x01] + [UInt8](repeating: 0, count: 14)))
        #expect(!LocalNetwork.contains([UInt8](repeating: 0, count: 10) + [0xFF, 0xFF, 8, 8, 8, 8]))
    }
}

@Suite struct LocalWebhookURLTests {
    @Test func readsHostPortAndPath() throws {
        let url = try LocalWebhookURL("http://127.0.0.1:9000/hooks/capfleet")
        #expect(url.host == "127.0.0.1")
        #expect(url.port == 9000)
        #expect(url.path == "/hooks/capfleet")
        let bare = try LocalWebhookURL("http://alerts.lan")
        #expect(bare.port == 80 && bare.path == "/")
        let v6 = try LocalWebhookURL("http://[fd00::5]:8080/x")
        #expect(v6.host == "fd00::5" && v6.port == 8080 && v6.description == "http://[fd00::5]:8080/x")
    }

    @Test func refusesOtherSchemesAndBadPorts() {
        #expect(throws: WebhookError.self) { try LocalWebhookURL("https://127.0.0.1/") }
        #expect(throws: WebhookError.self) { try LocalWebhookURL("http://127.0.0.1:http/") }
        #expect(throws: WebhookError.self) { try LocalWebhookURL("http://user@127.0.0.1/") }
    }
}

@Suite struct WebServerAndWebhookTests {
    struct Received: Sendable {
        var method: String
        var path: String
        var contentType: String?
        var body: [UInt8]
    }

    /// A webhook receiver on Hummingbird, as an operator's chat bridge would be: it keeps
    /// what it was sent and answers `status`.
    final class Inbox: Sendable { let requests = Mutex<[Received]>([]) }

    /// Runs a blocking call (the webhook client waits for its answer) on a thread of its own,
    /// as the coordinator's alert thread does: on the cooperative pool it would hold a thread
    /// the server's handlers need.
    static func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }

    static func receiver(status: HTTPResponse.Status = .noContent, into inbox: Inbox? = nil) async throws -> WebServer {
        let router = Router()
        router.post("/hook") { request, _ in
            let body = try await request.body.collect(upTo: 1 << 20)
            inbox?.requests.withLock {
                $0.append(
                    Received(
                        method: "\(request.method)", path: request.uri.path, contentType: request.headers[.contentType],
                        body: Array(buffer: body)))
            }
            return Response(status: status)
        }
        return try await WebServer.start(host: "127.0.0.1", port: 0, router: router, logger: Logger(label: "test"))
    }

    @Test func webhookPostReachesALocalReceiver() async throws {
        let inbox = Inbox()
        let server = try await Self.receiver(into: inbox)
        let body = Array(#"{"alert":"node_offline"}"#.utf8)
        let url = try LocalWebhookURL("http://127.0.0.1:\(server.port)/hook")
        let status = try await Self.onThread { try WebhookClient.post(body, to: url) }
        try await server.stop()
        #expect(status == 204)
        let request = try #require(inbox.requests.withLock { $0.first })
        #expect(request.method == "POST")
        #expect(request.path == "/hook")
        #expect(request.body == body)
        #expect(request.contentType == "application/json")
    }

    @Test func webhookReportsTheReceiversRefusal() async throws {
        let server = try await Self.receiver(status: .internalServerError)
        let url = try LocalWebhookURL("http://127.0.0.1:\(server.port)/hook")
        await #expect(throws: WebhookError.refused(url: url.description, status: 500)) {
            try await Self.onThread { try WebhookClient.post([], to: url) }
        }
        let elsewhere = try LocalWebhookURL("http://127.0.0.1:\(server.port)/other")
        await #expect(throws: WebhookError.refused(url: elsewhere.description, status: 404)) {
            try await Self.onThread { try WebhookClient.post([], to: elsewhere) }
        }
        try await server.stop()
    }

    @Test func webhookToAClosedPortFailsClearly() async throws {
        let server = try await Self.receiver()
        let port = server.port
        try await server.stop()
        let url = try LocalWebhookURL("http://127.0.0.1:\(port)/hook")
        await #expect(throws: WebhookError.connectionFailed(url: url.description, detail: "connection refused")) {
            try await Self.onThread { try WebhookClient.post([], to: url) }
        }
    }

    /// A receiver that takes the connection and never answers: the post gives up at its
    /// deadline, saying so, and the alert thread goes on.
    @Test func aReceiverThatNeverAnswers_timesOutAtTheDeadline() async throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 4) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        #expect(bound)
        let url = try LocalWebhookURL("http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))/hook")
        // Timed on the posting thread itself: the test's own task may wait for a busy pool.
        let (outcome, waited) = try await Self.onThread { () -> (Result<Int, WebhookError>, Duration) in
            let started = ContinuousClock.now
            let outcome = Result { () throws(WebhookError) in
                try WebhookClient.post(Array(repeating: 7, count: 100), to: url, timeoutMilliseconds: 300)
            }
            return (outcome, ContinuousClock.now - started)
        }
        #expect(throws: WebhookError.timedOut(url: url.description)) { try outcome.get() }
        #expect(waited >= .milliseconds(300) && waited < .seconds(10), "\(waited)")
    }

    /// Checked before any connection is made: no packet leaves for a public address.
    @Test func webhookToAPublicAddressIsRefusedBeforeConnecting() throws {
        #expect(throws: WebhookError.notLocal(host: "8.8.8.8", address: "8.8.8.8")) {
            try WebhookClient.post([], to: try LocalWebhookURL("http://8.8.8.8/"))
        }
    }

    /// A client that connects and says nothing holds no one else up.
    @Test func aSilentClient_doesNotHoldUpOthers() async throws {
        let server = try await Self.receiver()
        let silent = try connectLoopback(port: server.port)
        defer { close(silent) }
        let started = ContinuousClock.now
        let url = try LocalWebhookURL("http://127.0.0.1:\(server.port)/hook")
        let status = try await Self.onThread { try WebhookClient.post([], to: url, timeoutMilliseconds: 2000) }
        #expect(status == 204)
        #expect(ContinuousClock.now - started < .seconds(2))
        try await server.stop()
    }

    @Test func bindingATakenPortSaysSo() async throws {
        let first = try await Self.receiver()
        await #expect(throws: WebServerError.portInUse(host: "127.0.0.1", port: first.port)) {
            _ = try await WebServer.start(host: "127.0.0.1", port: first.port, router: Router(), logger: Logger(label: "test"))
        }
        try await first.stop()
    }

    @Test func whatIsNotServed_isA404SayingWhatIs() async throws {
        let router = Router(options: .autoGenerateHeadEndpoints)
        router.add(middleware: ExplainedNotFound("only /hello is served here"))
        router.get("/hello") { _, _ in "hello" }
        let server = try await WebServer.start(host: "127.0.0.1", port: 0, router: router, logger: Logger(label: "test"))
        let fd = try connectLoopback(port: server.port)
        defer { close(fd) }
        let text = try await Self.onThread {
            let request = Array("GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8)
            _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
            var answer: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(fd, &chunk, chunk.count)
                guard count > 0 else { break }
                answer += chunk[0..<count]
            }
            return String(decoding: answer, as: UTF8.self)
        }
        #expect(text.hasPrefix("HTTP/1.1 404"), "\(text)")
        #expect(text.hasSuffix("only /hello is served here\n"), "\(text)")
        try await server.stop()
    }

    func connectLoopback(port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
        return fd
    }
}

@Suite struct WebSecretTests {
    @Test func secrets_areLongURLSafeAndDifferent() {
        let secrets = (0..<100).map { _ in WebSecret.make() }
        #expect(Set(secrets).count == 100)
        #expect(secrets.allSatisfy { $0.count == 43 && $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" } })
    }

    @Test func theHash_isSHA256InHex() {
        // FIPS 180-2's "abc".
        #expect(WebSecret.hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(WebSecret.base64URL([0xFB, 0xFF]) == "-_8")
    }
}
