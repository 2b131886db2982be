import FleetCore
import FleetHTTP
import FleetProtocol
import FleetStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import SwiftProtobuf

/// The web dashboard's HTTP side (operator.md, "The web dashboard"): signing a browser in
/// from a one-time link, the page's files, and one door to the operator requests. Every
/// request through that door is answered by `OperatorRouter.answer` as the session's
/// operator, so roles, audit and refusals are those of the operator endpoint, with "via
/// dashboard" in the audit log.
struct DashboardRoutes: Sendable {
    let store: FleetDatabase
    /// The operator door every dashboard request goes through.
    let operators: OperatorRouter
    /// The live updates every signed-in page listens to, one WebSocket each.
    let feed: DashboardLiveFeed
    /// Full-rate frames to JPEGs for the camera page's live view.
    let renderer: LiveViewRenderer
    let clock: CoordinatorClock
    let rejections: RejectionCounter
    /// Under TLS the cookie is Secure.
    let secureCookies: Bool
    let logger: Logger

    static let endpointName = "dashboard"

    func add(to router: Router<WebRequestContext>) {
        router.get("/") { _, _ in try Self.asset("index.html") }
        router.get("/assets/:name") { _, context in
            try Self.asset(context.parameters.require("name"))
        }
        // The timecode page and the fleet time it shows: nothing to sign in for, since anyone
        // who can see the screen can read the time (proto-docs/clock.md, "Auditing exposures").
        router.get("/timecode") { _, _ in try Self.asset("timecode.html") }
        router.get("/api/fleet-time") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"fleet_ns":"\#(clock.fleetNow())"}"#)))
        }
        router.get("/signin") { request, context in try await signIn(request, context: context) }
        router.post("/api/signout") { request, context in try await signOut(request, context: context) }
        router.get("/api/session") { request, context in try await session(request, context: context) }
        router.post("/api/operator") { request, context in try await operatorRequest(request, context: context) }
        router.get("/api/previews/:device") { request, context in try await preview(request, context: context) }
        router.get("/api/view/:device") { request, context in try await liveView(request, context: context) }
        router.ws("/api/live") { request, context in
            try await liveUpgrade(request, context: context)
        } onUpgrade: { inbound, outbound, context in
            await live(inbound: inbound, outbound: outbound, request: context.request, context: context.requestContext)
        }
    }

    // MARK: Live updates

    /// A WebSocket only for a signed-in session, and only from the dashboard's own pages
    /// (a browser always says the page's origin in the handshake).
    func liveUpgrade(_ request: Request, context: WebRequestContext) async throws -> RouterShouldUpgrade {
        let (_, verdict) = try await verdict(on: request, context: context)
        guard case .allowed = verdict else {
            let refused = refusal(verdict, context: context)
            throw HTTPError(refused.status, message: "sign in first: run `capfleet dashboard login` and open the link it prints")
        }
        guard request.headers[.origin] != nil, Self.originIsOwn(request) else {
            let why = "a live connection opened from another site's page (\(request.headers[.origin] ?? "no origin"))"
            rejections.reject(endpoint: Self.endpointName, reason: .forgedRequest, peer: Self.peer(context), detail: why)
            throw HTTPError(.forbidden, message: why)
        }
        return .upgrade([:])
    }

    /// Sends the feed's messages until the browser goes away or its session ends (checked
    /// before every message, so a revoked session sees nothing more: it is told why, then
    /// the connection is closed).
    func live(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, request: Request, context: WebRequestContext) async {
        let (id, messages) = await feed.join()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // What the browser sends is not read (it asks over /api/operator): this ends
                // when it closes.
                do {
                    for try await _ in inbound {}
                } catch {
                    logger.debug("a dashboard live connection ended", metadata: ["error": "\(error)"])
                }
            }
            group.addTask {
                for await text in messages {
                    do {
                        let (_, verdict) = try await verdict(on: request, context: context)
                        if case let .signInNeeded(why) = verdict {
                            try await outbound.writeTextMessage(#"{"type":"signed_out","reason":\#(DashboardLiveFeed.quote(why))}"#)
                            try await outbound.close(.policyViolation, reason: "signed out")
                            return
                        }
                        try await outbound.writeTextMessage(text)
                    } catch {
                        logger.debug("a dashboard live connection could not be written", metadata: ["error": "\(error)"])
                        return
                    }
                }
            }
            await group.next()
            group.cancelAll()
        }
        await feed.leave(id)
    }

    // MARK: Signing in and out

    /// `/signin?token=…`: uses up the link, opens a session, sets its cookie and sends the
    /// browser to the dashboard. A refused link is a page saying why and what to do.
    func signIn(_ request: Request, context: WebRequestContext) async throws -> Response {
        let peer = Self.peer(context)
        guard let token = request.uri.queryParameters["token"].map(String.init), !token.isEmpty else {
            return Self.page(status: .badRequest, "This address needs its sign-in token: run `capfleet dashboard login` and open the link it prints.")
        }
        let now = clock.unixMilliseconds()
        let secret = WebSecret.make()
        let session = DashboardSessionRecord(
            id: "ds-" + String(WebSecret.make().prefix(10)), secretHash: WebSecret.hash(secret), operatorName: "", csrfToken: WebSecret.make(),
            createdAt: now, expiresAt: now + DashboardAccess.sessionLifetime, peer: peer,
            userAgent: String(request.headers[.userAgent]?.prefix(200) ?? ""))
        let outcome = try await store.redeemDashboardSignIn(tokenHash: WebSecret.hash(token), session: session, now: now) { opened in
            AuditEntry(
                at: now, actor: "\(opened.operatorName) via dashboard", action: "dashboard.sign_in", target: opened.id, outcome: "ok",
                detail: "from \(peer)")
        }
        switch outcome {
        case let .failure(refusal):
            rejections.reject(endpoint: Self.endpointName, reason: .badToken, peer: peer, detail: refusal.description)
            return Self.page(status: .forbidden, refusal.description)
        case let .success(opened):
            logger.notice("dashboard sign-in", metadata: ["operator": "\(opened.operatorName)", "session": "\(opened.id)", "peer": "\(peer)"])
            var response = Response(status: .seeOther, headers: [.location: "/", .cacheControl: "no-store"])
            response.setCookie(
                Cookie(
                    name: DashboardAccess.cookieName, value: secret, maxAge: Int(DashboardAccess.sessionLifetime / 1000),
                    path: "/", secure: secureCookies, httpOnly: true, sameSite: .strict))
            return response
        }
    }

    func signOut(_ request: Request, context: WebRequestContext) async throws -> Response {
        let (found, verdict) = try await verdict(on: request, context: context)
        guard case let .allowed(name, _) = verdict, let found else { return refusal(verdict, context: context) }
        let now = clock.unixMilliseconds()
        let actor = "\(name) via dashboard"
        _ = try await store.endDashboardSession(
            found.id, by: actor, at: now,
            audit: AuditEntry(
                at: now, actor: actor, action: "dashboard.session_end", target: found.id,
                outcome: "ok", detail: "signed out"))
        var response = Self.json(#"{"signed_out":true}"#)
        response.setCookie(
            Cookie(
                name: DashboardAccess.cookieName, value: "", maxAge: 0, path: "/", secure: secureCookies,
                httpOnly: true, sameSite: .strict))
        return response
    }

    /// Who the browser is signed in as, and the CSRF token its page sends with each change.
    func session(_ request: Request, context: WebRequestContext) async throws -> Response {
        let (found, verdict) = try await verdict(on: request, context: context)
        guard case let .allowed(name, role) = verdict, let found else { return refusal(verdict, context: context) }
        let body: [String: String] = [
            "operator": name, "role": role.rawValue, "csrf_token": found.csrfToken, "session_id": found.id,
            "expires_unix_ms": String(found.expiresAt),
        ]
        return Self.json(String(decoding: try JSONEncoder().encode(body), as: UTF8.self))
    }

    // MARK: The operator requests

    /// An `OperatorRequest` in protobuf's JSON mapping in, its `OperatorReply` out (the same
    /// messages as the operator endpoint, proto-docs/operator.proto).
    func operatorRequest(_ request: Request, context: WebRequestContext) async throws -> Response {
        let (_, verdict, account) = try await verdictAndAccount(on: request, context: context)
        guard case let .allowed(name, _) = verdict else { return refusal(verdict, context: context) }
        let body = try await request.body.collect(upTo: 1 << 20)
        let asked: Capfleet_V1_OperatorRequest
        do {
            asked = try Capfleet_V1_OperatorRequest(jsonUTF8Bytes: Array(buffer: body))
        } catch {
            rejections.reject(endpoint: Self.endpointName, reason: .undecodable, peer: Self.peer(context))
            return Self.json(
                #"{"status":{"code":"STATUS_CODE_BAD_REQUEST","message":"not an OperatorRequest in protobuf's JSON mapping"}}"#,
                status: .badRequest)
        }
        let handler = operators
        let (reply, _) = await handler.answer(
            asked, from: OperatorCaller(name: name, channel: .dashboard, peer: Self.peer(context), account: account))
        return Self.json(try reply.jsonString())
    }

    /// A device's latest preview as a JPEG, for the grid's image tiles.
    func preview(_ request: Request, context: WebRequestContext) async throws -> Response {
        let (_, verdict, account) = try await verdictAndAccount(on: request, context: context)
        guard case let .allowed(name, _) = verdict else { return refusal(verdict, context: context) }
        let device = try context.parameters.require("device")
        let asked = Capfleet_V1_OperatorRequest.with { $0.getPreview = .with { $0.deviceID = device } }
        let handler = operators
        let (reply, _) = await handler.answer(
            asked, from: OperatorCaller(name: name, channel: .dashboard, peer: Self.peer(context), account: account))
        guard reply.status.code == .ok, let shelved = reply.previews.first else {
            return Response(
                status: .notFound, headers: [.contentType: "text/plain; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: reply.status.reason + "\n")))
        }
        return Response(
            status: .ok, headers: [.contentType: "image/jpeg", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: shelved.jpeg)))
    }

    /// A device's full-rate live view as an MJPEG stream (multipart/x-mixed-replace, which an
    /// `<img>` shows): the device's full-rate flow is woken while the page holds the stream
    /// open and sleeps again when it closes. Frames the live-view thread had no time for are
    /// skipped, never queued.
    func liveView(_ request: Request, context: WebRequestContext) async throws -> Response {
        let (_, verdict, account) = try await verdictAndAccount(on: request, context: context)
        guard case let .allowed(name, _) = verdict else { return refusal(verdict, context: context) }
        let device = try context.parameters.require("device")
        let handler = operators
        let caller = OperatorCaller(name: name, channel: .dashboard, peer: Self.peer(context), account: account)
        // The role and the device, checked before the stream's header goes out.
        let (checked, _) = await handler.answer(.with { $0.getDevice = .with { $0.deviceID = device } }, from: caller)
        guard checked.status.code == .ok else {
            return Self.json(try checked.jsonString(), status: checked.status.code == .notFound ? .notFound : .forbidden)
        }
        let renderer = self.renderer
        let logger = self.logger
        let boundary = "capturefleet-frame"
        let body = ResponseBody { writer in
            let (pictures, delivered) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .bufferingNewest(1))
            let watching = Task {
                let status = await handler.watchLive(device, as: caller) { frame in
                    switch await renderer.jpeg(of: frame) {
                    case let .jpeg(bytes):
                        if case .terminated = delivered.yield(bytes) { return false }
                    case .busy:
                        break
                    case .stopped:
                        return false
                    case let .failed(error):
                        logger.warning("the dashboard's live view cannot picture a frame", metadata: ["device.id": "\(device)", "error": "\(error)"])
                        return false
                    }
                    return !Task.isCancelled
                }
                if status.code != .ok {
                    logger.info("a dashboard live view ended", metadata: ["device.id": "\(device)", "reason": "\(status.reason)"])
                }
                delivered.finish()
            }
            defer { watching.cancel() }
            for await jpeg in pictures {
                var part = ByteBuffer()
                part.writeString("--\(boundary)\r\nContent-Type: image/jpeg\r\nContent-Length: \(jpeg.count)\r\n\r\n")
                part.writeBytes(jpeg)
                part.writeString("\r\n")
                try await writer.write(part)
            }
            try await writer.finish(nil)
        }
        return Response(
            status: .ok, headers: [.contentType: "multipart/x-mixed-replace; boundary=\(boundary)", .cacheControl: "no-store"], body: body)
    }

    // MARK: Who asks

    /// The request's session (by its cookie) and what the rules say of the request.
    func verdict(on request: Request, context: WebRequestContext) async throws -> (DashboardSessionRecord?, DashboardAccess.Verdict) {
        let (session, verdict, _) = try await verdictAndAccount(on: request, context: context)
        return (session, verdict)
    }

    /// The same, with the session's operator record read alongside, for requests answered by
    /// `OperatorRouter` (which then need not read it again).
    func verdictAndAccount(
        on request: Request, context: WebRequestContext
    ) async throws
        -> (DashboardSessionRecord?, DashboardAccess.Verdict, OperatorRecord?)
    {
        let now = clock.unixMilliseconds()
        var found: (DashboardSessionRecord, OperatorRecord?)?
        if let secret = request.cookies[DashboardAccess.cookieName]?.value, !secret.isEmpty {
            found = try await store.dashboardSession(secretHash: WebSecret.hash(secret))
        }
        let session = found.map { record, account in
            DashboardAccess.Session(
                operatorName: record.operatorName, role: account.flatMap { OperatorRole(rawValue: $0.role) },
                csrfToken: record.csrfToken, expiresAtUnixMs: record.expiresAt, endedAtUnixMs: record.endedAt)
        }
        let changes = request.method != .get && request.method != .head
        let asked = DashboardAccess.Request(
            changesState: changes,
            csrfToken: request.headers[.captureFleetCSRF],
            originIsOwn: Self.originIsOwn(request))
        let verdict = DashboardAccess.verdict(on: asked, session: session, now: now)
        if case .allowed = verdict, let record = found?.0, now - record.lastSeenAt > 60_000 {
            try await store.touchDashboardSession(record.id, at: now)
        }
        return (found?.0, verdict, found?.1)
    }

    /// A refused request: 401 to sign in again, 403 for a forgery; both counted.
    func refusal(_ verdict: DashboardAccess.Verdict, context: WebRequestContext) -> Response {
        switch verdict {
        case .allowed:
            return Response(status: .internalServerError)
        case let .signInNeeded(why):
            rejections.reject(endpoint: Self.endpointName, reason: .notSignedIn, peer: Self.peer(context), detail: why)
            return Self.json(Self.statusJSON("STATUS_CODE_PERMISSION_DENIED", why), status: .unauthorized)
        case let .forgery(why):
            rejections.reject(endpoint: Self.endpointName, reason: .forgedRequest, peer: Self.peer(context), detail: why)
            return Self.json(Self.statusJSON("STATUS_CODE_PERMISSION_DENIED", why), status: .forbidden)
        }
    }

    /// The Origin header (sent by browsers with every POST) names the host the request was
    /// sent to; none at all is a same-origin navigation or a non-browser client.
    static func originIsOwn(_ request: Request) -> Bool {
        guard let origin = request.headers[.origin] else { return true }
        guard let host = request.head.authority else { return false }
        return origin == "http://\(host)" || origin == "https://\(host)"
    }

    static func peer(_ context: WebRequestContext) -> String { context.peer }

    // MARK: Answers

    static func statusJSON(_ code: String, _ message: String) -> String {
        let escaped = String(decoding: (try? JSONEncoder().encode(message)) ?? Data("\"\"".utf8), as: UTF8.self)
        return #"{"status":{"code":"\#(code)","message":\#(escaped)}}"#
    }

    static func json(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func page(status: HTTPResponse.Status, _ message: String) -> Response {
        let escaped = message.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
        let html = """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><title>CaptureFleet</title>
            <link rel="stylesheet" href="/assets/style.css"></head><body class="notice"><h1>CaptureFleet</h1><p>\(escaped)</p></body></html>
            """
        return Response(
            status: status, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    /// One of the page's files, from the binary (embedded by scripts/embed-dashboard-assets.py).
    static func asset(_ name: String) throws -> Response {
        guard let file = DashboardAssets.files[name] else { throw HTTPError(.notFound) }
        return Response(
            status: .ok,
            headers: [
                .contentType: file.contentType, .cacheControl: "no-cache",
                .contentSecurityPolicy: "default-src 'self'; img-src 'self' blob: data:; connect-src 'self'",
            ],
            body: .init(byteBuffer: ByteBuffer(bytes: file.bytes)))
    }
}
