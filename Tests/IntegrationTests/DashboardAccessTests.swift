import FleetBus
import Foundation
import GRDB
import Testing

extension SecondLaneIntegrationTests {
    /// The web dashboard's sign-in and its door to the operator requests, over real HTTP
    /// (curl with a cookie jar, as a browser keeps cookies) against a real coordinator.
    @Suite struct DashboardAccessTests {
        /// A browser: its own cookie jar, and curl's answer (status line, headers and body).
        struct Browser {
            let jar: String
            let base: String

            func request(
                _ method: String, _ path: String, body: String? = nil, headers: [String] = []
            ) throws -> (status: Int, headers: String, body: String) {
                var command = "curl -s -i --max-time 5 -b '\(jar)' -c '\(jar)' -X \(method) '\(base)\(path)'"
                for header in headers { command += " -H '\(header)'" }
                if let body { command += " -H 'Content-Type: application/json' --data-binary '\(body)'" }
                let output = try MetricsTests.run(command).output
                let parts = output.components(separatedBy: "\r\n\r\n")
                let head = parts.first ?? ""
                let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
                return (status, head, parts.dropFirst().joined(separator: "\r\n\r\n"))
            }

            /// The session's CSRF token, as the page reads it.
            func csrf() throws -> String {
                let answer = try request("GET", "/api/session")
                let object = try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: String]
                guard let token = object?["csrf_token"] else { throw HarnessError("no session: \(answer)") }
                return token
            }

            func operatorRequest(_ json: String, csrf: String?) throws -> (status: Int, body: String) {
                let answer = try request("POST", "/api/operator", body: json, headers: csrf.map { ["X-CaptureFleet-CSRF: \($0)"] } ?? [])
                return (answer.status, answer.body)
            }
        }

        static func signIn(_ fleet: FleetHarness, as user: String) throws -> Browser {
            let login = try fleet.cli(["dashboard", "login"], user: user)
            guard login.status == 0, let url = URL(string: login.output.trimmingCharacters(in: .whitespacesAndNewlines)),
                let port = url.port
            else { throw HarnessError("capfleet dashboard login failed: \(login.error) \(login.output)") }
            let browser = Browser(jar: fleet.directory + "/cookies-\(user)-\(UUID().uuidString.prefix(6))", base: "http://127.0.0.1:\(port)")
            let answer = try browser.request("GET", url.path + "?" + (url.query ?? ""))
            guard answer.status == 303 else { throw HarnessError("sign-in answered \(answer.status): \(answer.body)") }
            return browser
        }

        @Test func aOneTimeLink_signsABrowserIn_andItActsWithItsOperatorsRole() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("dash")
            try await fleet.waitUntil("the device registers", seconds: 20) { try !fleet.json(["devices"]).isEmpty }
            let device = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)

            // The link works once; the cookie is HttpOnly and SameSite=Strict.
            let login = try fleet.cli(["dashboard", "login"], user: "bo")
            let url = try #require(URL(string: login.output.trimmingCharacters(in: .whitespacesAndNewlines)))
            let browser = Browser(jar: fleet.directory + "/cookies-bo", base: "http://127.0.0.1:\(url.port ?? 0)")
            let first = try browser.request("GET", url.path + "?" + (url.query ?? ""))
            #expect(first.status == 303)
            let cookie = first.headers.split(separator: "\r\n").first { $0.lowercased().hasPrefix("set-cookie:") }.map(String.init) ?? ""
            #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "\(cookie)")
            let stranger = Browser(jar: fleet.directory + "/cookies-stranger", base: browser.base)
            let again = try stranger.request("GET", url.path + "?" + (url.query ?? ""))
            #expect(again.status == 403 && again.body.contains("used already"), "\(again)")

            // The page and a listing, as bo.
            let page = try browser.request("GET", "/")
            #expect(page.status == 200 && page.body.contains("/assets/app.js"))
            let csrf = try browser.csrf()
            let listing = try browser.operatorRequest(#"{"listDevices":{}}"#, csrf: csrf)
            #expect(listing.status == 200 && listing.body.contains(device), "\(listing)")

            // A change without the page's token is a forgery: refused and counted.
            let forged = try browser.operatorRequest(#"{"lockDevice":{"deviceId":"\#(device)","seconds":30}}"#, csrf: nil)
            #expect(forged.status == 403, "\(forged)")
            let foreign = try browser.request(
                "POST", "/api/operator", body: #"{"listDevices":{}}"#,
                headers: ["X-CaptureFleet-CSRF: \(csrf)", "Origin: http://evil.example"])
            #expect(foreign.status == 403, "\(foreign)")
            let locked = try browser.operatorRequest(#"{"lockDevice":{"deviceId":"\#(device)","seconds":30}}"#, csrf: csrf)
            #expect(locked.body.contains("STATUS_CODE_OK") && locked.body.contains("bo via dashboard"), "\(locked)")

            // A viewer's session asks for what a viewer may not do: refused as on the operator endpoint, audited.
            let viewer = try Self.signIn(fleet, as: "vi")
            let refused = try viewer.operatorRequest(
                #"{"changeConsent":{"deviceId":"\#(device)","action":"CONSENT_ACTION_GRANT","reason":"x"}}"#,
                csrf: try viewer.csrf())
            #expect(refused.body.contains("STATUS_CODE_PERMISSION_DENIED"), "\(refused)")
            let audit = try await DatabaseQueue(path: fleet.databasePath).read { db in
                try Row.fetchAll(db, sql: "SELECT actor, action, outcome FROM auditLog WHERE actor LIKE '% via dashboard' ORDER BY id")
                    .map { "\($0["actor"] as String) \($0["action"] as String) \($0["outcome"] as String)" }
            }
            #expect(audit.contains("vi via dashboard access.denied refused"), "\(audit)")
            #expect(
                audit.contains("bo via dashboard device.lock ok") || audit.contains { $0.hasPrefix("bo via dashboard") && $0.hasSuffix("ok") },
                "\(audit)")
            // /metrics is refreshed once a second.
            try await fleet.waitUntil("/metrics counts the two forgeries", seconds: 5) {
                try MetricsTests.scrape(fleet).value("capfleet_rejected_messages_total", ["endpoint": "dashboard", "reason": "forged_request"]) == 2
            }

            // The live connection (a WebSocket) opens only from the dashboard's own pages, and
            // only for a signed-in browser.
            let handshake = ["Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="]
            // (A refused handshake is answered 400, as the upgrade answers any refusal; the
            // browser's script sees only that the connection failed.)
            let foreignLive = try browser.request("GET", "/api/live", headers: handshake + ["Origin: http://evil.example"])
            #expect(foreignLive.status == 400, "\(foreignLive)")
            let ownLive = try browser.request("GET", "/api/live", headers: handshake + ["Origin: \(browser.base)"])
            #expect(ownLive.status == 101, "\(ownLive)")
            let signedOut = Browser(jar: fleet.directory + "/cookies-nobody", base: browser.base)
            #expect(try signedOut.request("GET", "/api/live", headers: handshake + ["Origin: \(browser.base)"]).status == 400)
            try await fleet.waitUntil("/metrics counts the foreign handshake as a forgery", seconds: 5) {
                try MetricsTests.scrape(fleet).value("capfleet_rejected_messages_total", ["endpoint": "dashboard", "reason": "forged_request"]) == 3
            }

            // Signed out: the cookie no longer works. The operator removed: neither does theirs.
            #expect(try browser.request("POST", "/api/signout", headers: ["X-CaptureFleet-CSRF: \(csrf)"]).status == 200)
            #expect(try browser.operatorRequest(#"{"listDevices":{}}"#, csrf: csrf).status == 401)
            let sessions = try fleet.json(["dashboard", "sessions"])
            #expect(sessions.map { $0["operator_name"] as? String } == ["vi"], "\(sessions)")
            #expect(try fleet.cli(["operator", "remove", "vi"]).status == 0)
            #expect(try viewer.request("GET", "/api/session").status == 401)
        }

        /// Opened to a network, the dashboard is served over HTTPS from PEM files: the sign-in
        /// link says https, the cookie is Secure, and plain HTTP gets no answer.
        @Test func withCertificateFiles_theDashboardAndMetricsAreServedOverHTTPS() async throws {
            let fleet = try FleetHarness()
            let certificate = fleet.directory + "/tls-cert.pem", key = fleet.directory + "/tls-key.pem"
            let made = try MetricsTests.run(
                "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 "
                    + "-keyout '\(key)' -out '\(certificate)' 2>&1; echo \"exit $?\"")
            try #require(made.output.hasSuffix("exit 0\n"), "\(made.output)")
            try fleet.startCoordinator(environment: ["CAPFLEET_HTTP_TLS_CERT": certificate, "CAPFLEET_HTTP_TLS_KEY": key])
            let login = try fleet.cli(["dashboard", "login"], user: "bo")
            let url = login.output.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(url.hasPrefix("https://"), "\(login.output)\(login.error)")
            let signIn = try MetricsTests.run("curl -s -i --max-time 5 --cacert '\(certificate)' '\(url)'")
            #expect(signIn.output.hasPrefix("HTTP/1.1 303"), "\(signIn.output)")
            let cookie = signIn.output.split(separator: "\r\n").first { $0.lowercased().hasPrefix("set-cookie:") }.map(String.init) ?? ""
            #expect(cookie.contains("Secure") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "\(cookie)")
            let metrics = try MetricsTests.run("curl -sf --max-time 5 --cacert '\(certificate)' https://127.0.0.1:\(fleet.metricsPort)/metrics")
            #expect(metrics.status == 0 && metrics.output.contains("capfleet_"), "metrics over HTTPS")
            #expect(try MetricsTests.run("curl -sf --max-time 5 http://127.0.0.1:\(fleet.metricsPort)/metrics").status != 0, "no plain HTTP")

            // One file without the other is a settings error that names both.
            let half = try fleet.run(
                ["coordinator", "--data", fleet.directory + "/half", "--check-config"],
                environment: ["CAPFLEET_HTTP_TLS_CERT": certificate])
            #expect(half.status != 0 && half.error.contains("http_tls_cert and http_tls_key go together"), "\(half.error)")
        }
    }
}
