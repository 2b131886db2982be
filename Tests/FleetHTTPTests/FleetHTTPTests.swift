@testable import FleetHTTP
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite struct HTTPRequestParserTests {
    @Test func parsesRequestLineQueryAndHeaders() throws {
        let bytes = Array("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: text/plain\r\n\r\n".utf8)
        let request = try #require(HTTPRequestParser.parse(bytes))
        #expect(request.method == "GET")
        #expect(request.path == "/metrics")
        #expect(request.query == "x=1")
        #expect(request.headers["accept"] == "text/plain")
    }

    @Test func refusesWhatIsNotHTTP() {
        #expect(HTTPRequestParser.parse(Array("hello\r\n\r\n".utf8)) == nil)
        #expect(HTTPRequestParser.parse(Array("GET metrics HTTP/1.1\r\n\r\n".utf8)) == nil)
        #expect(HTTPRequestParser.parse(Array("GET / HTTP/1.1\r\nno colon\r\n\r\n".utf8)) == nil)
        #expect(HTTPRequestParser.headerEnd(in: Array("GET / HTTP/1.1\r\n".utf8)) == nil)
    }
}

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

@Suite struct HTTPServerAndWebhookTests {
    @Test func webhookPostReachesALocalReceiver() throws {
        let received = Mutex<[HTTPRequest]>([])
        let server = try HTTPServer(host: "127.0.0.1", port: 0) { request in
            received.withLock { $0.append(request) }
            return HTTPResponse(status: 204, body: [])
        }
        defer { server.stop() }
        let body = Array(#"{"alert":"node_offline"}"#.utf8)
        let status = try WebhookClient.post(body, to: try LocalWebhookURL("http://127.0.0.1:\(server.port)/hook"))
        #expect(status == 204)
        let request = try #require(received.withLock { $0.first })
        #expect(request.method == "POST")
        #expect(request.path == "/hook")
        #expect(request.body == body)
        #expect(request.headers["content-type"] == "application/json")
    }

    @Test func webhookReportsTheReceiversRefusal() throws {
        let server = try HTTPServer(host: "127.0.0.1", port: 0) { _ in HTTPResponse(status: 500, text: "no") }
        defer { server.stop() }
        let url = try LocalWebhookURL("http://127.0.0.1:\(server.port)/")
        #expect(throws: WebhookError.refused(url: url.description, status: 500)) { try WebhookClient.post([], to: url) }
    }

    @Test func webhookToAClosedPortFailsClearly() throws {
        let server = try HTTPServer(host: "127.0.0.1", port: 0) { _ in HTTPResponse(status: 200, body: []) }
        let port = server.port
        server.stop()
        #expect(throws: WebhookError.connectionFailed(url: "http://127.0.0.1:\(port)/", errno: ECONNREFUSED)) {
            try WebhookClient.post([], to: try LocalWebhookURL("http://127.0.0.1:\(port)/"))
        }
    }

    /// Checked before any connection is made: no packet leaves for a public address.
    @Test func webhookToAPublicAddressIsRefusedBeforeConnecting() throws {
        #expect(throws: WebhookError.notLocal(host: "8.8.8.8", address: "8.8.8.8")) {
            try WebhookClient.post([], to: try LocalWebhookURL("http://8.8.8.8/"))
        }
    }

    @Test func serverTimesOutASilentClientAndGoesOnServing() throws {
        let server = try HTTPServer(host: "127.0.0.1", port: 0) { _ in HTTPResponse(status: 200, text: "fine") }
        defer { server.stop() }
        let silent = try connectLoopback(port: server.port)
        defer { close(silent) }
        // The silent client holds the server for at most its read deadline, then gets 408.
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = read(silent, &buffer, buffer.count)
        #expect(String(decoding: buffer[0..<max(0, count)], as: UTF8.self).hasPrefix("HTTP/1.1 408"))
        let status = try WebhookClient.post([], to: try LocalWebhookURL("http://127.0.0.1:\(server.port)/"))
        #expect(status == 200)
    }

    @Test func bindingATakenPortSaysSo() throws {
        let first = try HTTPServer(host: "127.0.0.1", port: 0) { _ in HTTPResponse(status: 200, body: []) }
        defer { first.stop() }
        #expect(throws: HTTPServerError.cannotBind(host: "127.0.0.1", port: first.port, errno: EADDRINUSE)) {
            _ = try HTTPServer(host: "127.0.0.1", port: first.port) { _ in HTTPResponse(status: 200, body: []) }
        }
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
