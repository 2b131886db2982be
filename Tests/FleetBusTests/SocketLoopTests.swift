import FleetBus
import Foundation
import Synchronization
import Testing

@Suite struct SocketLoopTests {

    final class Tracked: Sendable {
        let onDeinit: @Sendable () -> Void
        init(_ onDeinit: @escaping @Sendable () -> Void) { self.onDeinit = onDeinit }
        deinit { onDeinit() }
    }

    /// A CURVE server's keys and a client key the ZAP handler lets in as "tester".
    struct Keys {
        let server = try! CurveKeyPair.generate()
        let client = try! CurveKeyPair.generate()
        var security: CurveServerSecurity { CurveServerSecurity(keys: server, domain: "test") { _, _ in } }

        func zap(_ context: ZMQContext) throws -> ZAPHandler {
            let client = self.client.publicKey
            return try ZAPHandler(context: context) { request in
                request.clientKey == client && request.domain == "test" ? .allow(userID: "tester") : .deny(reason: "unknown key")
            }
        }

        func dealer(_ context: ZMQContext, to endpoint: String, keys: CurveKeyPair? = nil) throws -> ZMQSocket {
            let socket = try ZMQSocket(context: context, type: .dealer)
            try socket.makeCurveClient(serverKey: server.publicKey, keys: keys ?? client)
            try socket.connect(endpoint)
            return socket
        }
    }

    @Test func routerEndpoint_deliversRequestsAndSendsReplies() async throws {
        let context = ZMQContext()
        let keys = Keys()
        let zap = try keys.zap(context)
        defer { zap.stop() }
        let endpoint = try RouterEndpoint(name: "test", context: context, bind: "tcp://127.0.0.1:*", maxMessageBytes: 1024, security: keys.security)
        defer { endpoint.stop() }
        let client = try keys.dealer(context, to: endpoint.boundEndpoint)
        try client.send(Array("ping".utf8))
        var iterator = endpoint.messages.makeAsyncIterator()
        let request = try #require(await iterator.next())
        #expect(String(decoding: request.parts[0].array, as: UTF8.self) == "ping")
        #expect(request.peer == "127.0.0.1")
        #expect(request.userID == "tester", "the ZAP handler's verdict travels with every message")
        // Read in place by endpoints that check only the kind of sender.
        let part = request.parts[0]
        #expect(part.userID(hasPrefix: "test") && part.userID(hasPrefix: "tester"))
        #expect(!part.userID(hasPrefix: "testers") && !part.userID(hasPrefix: "node:"))
        #expect(request.sourceFD >= 0)
        endpoint.reply(to: request.routingID, parts: [Array("pong".utf8)])
        #expect(client.waitForInput(milliseconds: 2000))
        let reply = try #require(try client.receiveMultipart(dontWait: true))
        #expect(String(decoding: reply.parts[0].array, as: UTF8.self) == "pong")
    }

    @Test func routerEndpoint_refusesUnknownKeysAndPlainPeers_andSaysWhy() async throws {
        let context = ZMQContext()
        let keys = Keys()
        let zap = try keys.zap(context)
        defer { zap.stop() }
        let failures = Mutex<[String]>([])
        let security = CurveServerSecurity(keys: keys.server, domain: "test") { _, event in
            failures.withLock { $0.append(event.handshakeFailure ?? "?") }
        }
        let endpoint = try RouterEndpoint(name: "test", context: context, bind: "tcp://127.0.0.1:*", maxMessageBytes: 1024, security: security)
        defer { endpoint.stop() }
        let stranger = try keys.dealer(context, to: endpoint.boundEndpoint, keys: try CurveKeyPair.generate())
        try stranger.send(Array("let me in".utf8), dontWait: true)
        let plain = try ZMQSocket(context: context, type: .dealer)
        try plain.connect(endpoint.boundEndpoint)
        try plain.send(Array("no keys at all".utf8), dontWait: true)
        let wrongServer = try ZMQSocket(context: context, type: .dealer)
        try wrongServer.makeCurveClient(serverKey: try CurveKeyPair.generate().publicKey, keys: keys.client)
        try wrongServer.connect(endpoint.boundEndpoint)
        try wrongServer.send(Array("wrong coordinator".utf8), dontWait: true)
        let received = await withTaskGroup(of: RoutedMessage?.self) { group in
            group.addTask {
                var iterator = endpoint.messages.makeAsyncIterator(); return await iterator.next()
            }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(1500)); return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        #expect(received == nil, "nothing from an unknown key, a plain peer or a peer with the wrong server key reaches the endpoint")
        let seen = failures.withLock { $0 }
        #expect(seen.contains { $0.hasPrefix("refused by the ZAP handler") }, "\(seen)")
        #expect(seen.contains { $0.hasPrefix("not CURVE") }, "\(seen)")
        #expect(seen.contains { $0.hasPrefix("CURVE with the wrong server key") }, "\(seen)")
    }

    @Test func curveCertificate_roundTripsAndKeepsTheSecretPrivate() throws {
        let keys = try CurveKeyPair.generate()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-cert-\(UUID().uuidString.prefix(8))").path
        let path = directory + "/sub/test.key_secret"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try CurveCertificate(keys: keys, metadata: [("name", "ana"), ("coordinator-key", keys.publicKey.z85)]).save(path: path, title: "test")
        let loaded = try CurveCertificate.load(path: path)
        #expect(loaded.keys?.secretBytes == keys.secretBytes && loaded.publicKey == keys.publicKey)
        #expect(loaded["name"] == "ana" && loaded["coordinator-key"] == keys.publicKey.z85)
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        #expect(mode == 0o600)
        #expect(!"\(keys)".contains(keys.secretZ85), "a key pair's description never shows the secret")
        // A secret that does not belong to the public key is refused, not silently used.
        let other = try CurveKeyPair.generate()
        let text = try String(contentsOfFile: path, encoding: .utf8).replacingOccurrences(of: keys.secretZ85, with: other.secretZ85)
        #expect(throws: CurveCertificateError.self) { try CurveCertificate(text: text, path: path) }
    }

    @Test func enrollmentToken_roundTripsAndRejectsDamage() throws {
        let token = EnrollmentToken(keys: try CurveKeyPair.generate(), coordinatorKey: try CurveKeyPair.generate().publicKey)
        let parsed = try EnrollmentToken(text: token.text)
        #expect(parsed.keys.publicKey == token.keys.publicKey && parsed.coordinatorKey == token.coordinatorKey)
        #expect(token.text.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }, "safe to paste into a shell")
        #expect(!"\(token)".contains(token.text))
        #expect(throws: EnrollmentTokenError.self) { try EnrollmentToken(text: String(token.text.dropLast(3))) }
        #expect(throws: EnrollmentTokenError.self) { try EnrollmentToken(text: "cfe2_" + token.text.dropFirst(5)) }
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
    }

    @Test func routerEndpoint_dropsAPeerWhoseMessageExceedsTheLimit() async throws {
        let context = ZMQContext()
        let keys = Keys()
        let zap = try keys.zap(context)
        defer { zap.stop() }
        let endpoint = try RouterEndpoint(name: "test", context: context, bind: "tcp://127.0.0.1:*", maxMessageBytes: 1024, security: keys.security)
        defer { endpoint.stop() }
        let client = try keys.dealer(context, to: endpoint.boundEndpoint)
        try client.send([UInt8](repeating: 1, count: 4096))
        try client.send(Array("small".utf8))
        // The oversized message never surfaces: libzmq drops the connection before
        // allocating it. The small one may arrive after the DEALER reconnects, or not.
        let received = await withTaskGroup(of: RoutedMessage?.self) { group in
            group.addTask {
                var iterator = endpoint.messages.makeAsyncIterator(); return await iterator.next()
            }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(500)); return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        #expect(received == nil || received!.parts.allSatisfy { $0.count <= 1024 })
    }

    @Test func zeroCopySend_releasesTheOwnerOnceSent() async throws {
        let context = ZMQContext()
        let pull = try ZMQSocket(context: context, type: .pull)
        try pull.bind("tcp://127.0.0.1:*")
        let push = try ZMQSocket(context: context, type: .push)
        try push.connect(try pull.lastEndpoint())
        let released = Atomic<Bool>(false)
        let storage = UnsafeMutableRawPointer.allocate(byteCount: 1 << 20, alignment: 64)
        defer { storage.deallocate() }
        storage.initializeMemory(as: UInt8.self, repeating: 7, count: 1 << 20)
        do {
            let owner = Tracked { released.store(true, ordering: .releasing) }
            try push.sendZeroCopy(storage, count: 1 << 20, owner: owner)
        }
        #expect(pull.waitForInput(milliseconds: 2000))
        let message = try #require(try pull.receiveMultipart(dontWait: true))
        #expect(message.parts[0].count == 1 << 20)
        // The bytes are the message's own: read them while the message is alive (an optimised
        // build may end its lifetime at its last use).
        let allSevens = withExtendedLifetime(message) { message.parts[0].bytes.allSatisfy { $0 == 7 } }
        #expect(allSevens)
        for _ in 0..<50 where !released.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(20)) }
        let wasReleased = released.load(ordering: .acquiring)
        #expect(wasReleased, "libzmq gave the buffer back after sending")
    }

    @Test func socketLoop_runsPerformedWorkOnItsThreadAndTimers() async throws {
        let loop = SocketLoop(name: "test")
        let ticks = Atomic<Int>(0)
        loop.every(nanoseconds: 20_000_000) { _ in ticks.add(1, ordering: .relaxed) }
        loop.start()
        let ran = Atomic<Bool>(false)
        loop.perform { _ in ran.store(true, ordering: .releasing) }
        try await Task.sleep(for: .milliseconds(200))
        loop.stop()
        let didRun = ran.load(ordering: .acquiring), tickCount = ticks.load(ordering: .relaxed)
        #expect(didRun)
        #expect(tickCount >= 5)
    }

    @Test func socketLoop_idleTimerSleepsUntilScheduled_andRunsWhenItSays() async throws {
        let loop = SocketLoop(name: "test")
        let idleRuns = Atomic<Int>(0), pacedRuns = Atomic<Int>(0)
        // Runs once at the start, then only when work arrives.
        let idle = loop.timer(after: 0) { _ in
            idleRuns.add(1, ordering: .relaxed)
            return nil
        }
        // Asks for three runs 10 ms apart, then goes idle.
        loop.timer(after: 0) { _ in
            pacedRuns.add(1, ordering: .relaxed).newValue < 3 ? 10_000_000 : nil
        }
        loop.start()
        try await Task.sleep(for: .milliseconds(300))
        let beforeWork = idleRuns.load(ordering: .relaxed), paced = pacedRuns.load(ordering: .relaxed)
        #expect(beforeWork == 1, "an idle timer does not run again by itself")
        #expect(paced == 3)
        loop.perform { sockets in sockets.schedule(idle, after: 0) }
        try await Task.sleep(for: .milliseconds(200))
        loop.stop()
        let afterWork = idleRuns.load(ordering: .relaxed)
        #expect(afterWork == 2, "scheduling wakes it once")
    }

    @Test func zmqErrors_nameTheCallAndTheEndpoint() throws {
        let context = ZMQContext()
        let socket = try ZMQSocket(context: context, type: .pull)
        #expect {
            try socket.bind("tcp://256.0.0.1:1")
        } throws: { error in
            String(describing: error).contains("zmq_bind") && String(describing: error).contains("tcp://256.0.0.1:1")
        }
        #expect(ZMQContext.hasCurve, "Debian's libzmq is built with CURVE, which the security work needs")
    }
}
