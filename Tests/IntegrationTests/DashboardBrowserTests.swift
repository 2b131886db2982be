import FleetTestSupport
import Foundation
import Testing

extension IntegrationTests {
    /// The web dashboard in a real browser (Debian's chromium, headless, over the DevTools
    /// protocol) against a real coordinator and agents with synthetic cameras: what a person
    /// sees and does, checked on the page's own pixels and through the CLI.
    @Suite(.serialized) struct DashboardBrowserTests {
        /// Screenshots for a person to look at: .build/screenshots/ in the package.
        static let screenshots = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/screenshots").path

        /// What the page's JavaScript reads of a tile's picture: its mean brightness (0-255,
        /// -1 before it has loaded) and a hash of its pixels.
        static func tilePicture(_ deviceID: String) -> String {
            """
            (() => {
              const img = document.querySelector('.tile[data-device="\(deviceID)"] img');
              if (!img || !img.complete || !img.naturalWidth) return { luma: -1, hash: 0 };
              const canvas = document.createElement('canvas');
              canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
              const context = canvas.getContext('2d');
              context.drawImage(img, 0, 0);
              const pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
              let sum = 0, hash = 2166136261;
              for (let i = 0; i < pixels.length; i += 4) {
                sum += pixels[i] + pixels[i + 1] + pixels[i + 2];
                hash = Math.imul(hash ^ pixels[i] ^ (pixels[i + 1] << 8) ^ (pixels[i + 2] << 16), 16777619) >>> 0;
              }
              return { luma: sum / (pixels.length / 4) / 3, hash };
            })()
            """
        }

        static func picture(_ page: HeadlessChromium.Page, _ deviceID: String) throws -> (luma: Double, hash: Double) {
            let value = try page.evaluate(tilePicture(deviceID)) as? [String: Any]
            return ((value?["luma"] as? Double) ?? -1, (value?["hash"] as? Double) ?? 0)
        }

        /// The one-time sign-in URL `capfleet dashboard login` prints for `user`.
        static func signInURL(_ fleet: FleetHarness, as user: String) throws -> String {
            let login = try fleet.cli(["dashboard", "login"], user: user)
            guard login.status == 0 else { throw HarnessError("capfleet dashboard login failed: \(login.error)") }
            return login.output.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// Whether any control an operator uses is visible on the page.
        static let visibleControls = """
            [...document.querySelectorAll('.operate, .operate button, #take-start, .consent-grant')]
              .filter((e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden').length
            """

        @Test func theDashboardInABrowser_showsSteersAndGuardsTheFleet() async throws {
            guard FileManager.default.isExecutableFile(atPath: HeadlessChromium.binary) else {
                Issue.record("no \(HeadlessChromium.binary): scripts/install-deps.sh installs Debian's chromium")
                return
            }
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("stage-left", synthetic: 2, fps: 15)
            try fleet.startAgent("stage-right", synthetic: 1, fps: 15)
            try await fleet.waitUntil("three cameras register", seconds: 30) { try fleet.json(["devices"]).count == 3 }
            let devices = try fleet.json(["devices"]).compactMap { $0["device_id"] as? String }.sorted()
            // Two cameras shown from the start; the third's consent is granted from the page.
            try fleet.grantConsent(devices[0])
            try fleet.grantConsent(devices[1])
            let hidden = devices[2]

            let browser = try HeadlessChromium(directory: fleet.directory)
            defer { browser.stop() }
            let page = try browser.newPage()
            try page.navigate(try Self.signInURL(fleet, as: "bo"))
            try await page.waitUntil("the grid shows every camera", seconds: 20, "document.querySelectorAll('.tile').length === 3")
            try await page.waitUntil("the live connection is up", seconds: 10, "document.getElementById('connection').textContent === 'live'")
            #expect(try page.evaluate("document.getElementById('who').textContent") as? String == "bo (operator)")

            // The previews flow: granted cameras show the test pattern, and its burned-in frame
            // number changes the picture from one preview to the next.
            for device in devices.prefix(2) {
                try await page.waitUntil("\(device)'s preview shows", seconds: 20, "(\(Self.tilePicture(device))).luma > 20")
            }
            let before = try Self.picture(page, devices[0])
            try await page.waitUntil("\(devices[0])'s preview changes", seconds: 10, "(\(Self.tilePicture(devices[0]))).hash !== \(Int(before.hash))")
            try await page.waitUntil("\(hidden)'s preview shows", seconds: 20, "(\(Self.tilePicture(hidden))).luma >= 0")
            #expect(try Self.picture(page, hidden).luma < 3, "a camera without consent is black on the page")
            try page.screenshot(to: Self.screenshots + "/dashboard-fleet.png")

            // Consent granted from the consent page turns its tile from black to the test pattern.
            try page.navigate(page.baseURL(from: try page.evaluate("location.href") as? String) + "#consent")
            try await page.waitUntil("the consent page lists the cameras", seconds: 10, "document.querySelectorAll('#consent-devices tbody tr').length === 3")
            _ = try page.evaluate("""
                (() => { const row = document.querySelector('#consent-devices tr[data-device="\(hidden)"]');
                  row.querySelector('input.reason').value = 'scene cleared with the crew';
                  row.querySelector('button.consent-grant').click(); return true; })()
                """)
            try await page.waitUntil("the history shows the grant", seconds: 15,
                                     "document.querySelector('#consent-all-history tbody').textContent.includes('scene cleared with the crew')")
            try page.navigate(try page.evaluate("location.href.split('#')[0]") as! String + "#fleet")
            try await page.waitUntil("\(hidden)'s tile shows the test pattern", seconds: 20, "(\(Self.tilePicture(hidden))).luma > 20")
            let history = try fleet.cli(["consent", "history", hidden])
            #expect(history.output.contains("bo via dashboard") && history.output.contains("scene cleared with the crew"), "\(history.output)")

            // The camera page: the lease taken and a zoom set from the page show in the frames.
            let base = try page.evaluate("location.href.split('#')[0]") as? String ?? ""
            try page.navigate(base + "#camera/" + devices[0])
            try await page.waitUntil("the camera page lists its formats", seconds: 15, "document.querySelectorAll('#formats tbody tr').length > 0")
            _ = try page.evaluate("document.getElementById('lease-take').click(); true")
            try await page.waitUntil("the page says bo holds the lease", seconds: 10,
                                     "document.getElementById('camera-lease').textContent.includes('bo via dashboard')")
            _ = try page.evaluate("document.getElementById('zoom-factor').value = '2'; document.getElementById('zoom-set').click(); true")
            try await fleet.waitUntil("the frames carry zoom 2", seconds: 15) {
                (try fleet.deviceStats()[devices[0]]?["zoom_factor"] as? Double ?? 1) > 1.99
            }
            try await page.waitUntil("the page shows zoom 2", seconds: 10, "document.getElementById('camera-zoom').textContent.startsWith('2.00x')")
            // The full-rate live view wakes the camera's flow while it is shown, and lets it sleep after.
            _ = try page.evaluate("document.getElementById('live-toggle').click(); true")
            try await page.waitUntil("the live view shows frames", seconds: 20,
                                     "document.getElementById('camera-preview').src.includes('/api/view/') && document.getElementById('camera-preview').naturalWidth > 0")
            try await fleet.waitUntil("the device's live flow is on for the page", seconds: 10) {
                let device = try fleet.json(["devices"]).first { $0["device_id"] as? String == devices[0] }
                return (device?["live_consumers"] as? [String] ?? []).contains { $0.hasPrefix("dashboard view") } && device?["live_flow"] as? Bool == true
            }
            try page.screenshot(to: Self.screenshots + "/dashboard-camera.png")
            _ = try page.evaluate("document.getElementById('live-toggle').click(); true")
            try await fleet.waitUntil("the live flow sleeps once the view closes", seconds: 15) {
                let device = try fleet.json(["devices"]).first { $0["device_id"] as? String == devices[0] }
                return (device?["live_consumers"] as? [String] ?? []).isEmpty
            }
            _ = try page.evaluate("document.getElementById('lease-give').click(); true")

            // A take of two selected cameras started from the page is the CLI's take too.
            try page.navigate(base + "#takes")
            try await page.waitUntil("the takes page lists the cameras", seconds: 10, "document.querySelectorAll('#take-cameras input').length === 3")
            _ = try page.evaluate("""
                (() => { for (const box of document.querySelectorAll('#take-cameras input')) {
                    if (box.value === '\(devices[0])' || box.value === '\(devices[2])') { box.checked = true; box.dispatchEvent(new Event('change')); } }
                  document.getElementById('take-name').value = 'browser-take';
                  document.getElementById('take-start').click(); return true; })()
                """)
            try await page.waitUntil("the page lists the take", seconds: 15, "document.querySelector('#takes tbody').textContent.includes('browser-take')")
            let listed = try fleet.json(["recordings", "list"])
            let take = try #require(listed.first { $0["name"] as? String == "browser-take" }, "\(listed)")
            #expect(take["created_by"] as? String == "bo via dashboard", "\(take)")
            try await Task.sleep(for: .seconds(2))
            _ = try page.evaluate("document.querySelector('#takes tr[data-take=\"\(take["id"] as? String ?? "")\"] button.operate').click(); true")
            try await fleet.waitUntil("the take stops", seconds: 30) {
                try fleet.json(["recordings", "list"]).first { $0["name"] as? String == "browser-take" }?["state"] as? String == "stopped"
            }
            try await page.waitUntil("the page shows where each part lives", seconds: 10,
                                     "document.querySelectorAll('#take-parts tbody tr').length === 2")
            try page.screenshot(to: Self.screenshots + "/dashboard-takes.png")

            // A viewer, in a browser of their own: no controls; a forged change refused and counted.
            let viewer = try browser.newPage()
            try viewer.navigate(try Self.signInURL(fleet, as: "vi"))
            try await viewer.waitUntil("the viewer sees the grid", seconds: 20, "document.querySelectorAll('.tile').length === 3")
            #expect(try viewer.evaluate(Self.visibleControls) as? Double == 0, "a viewer sees no controls")
            let forged = try viewer.evaluate("""
                fetch('/api/operator', { method: 'POST', headers: { 'Content-Type': 'application/json' },
                  body: JSON.stringify({ changeConsent: { deviceId: '\(devices[0])', action: 'CONSENT_ACTION_REVOKE', reason: 'x' } }) })
                  .then((r) => r.status)
                """) as? Double
            #expect(forged == 403, "a change without the page's token is refused as a forgery")
            let asViewer = try viewer.evaluate("""
                fetch('/api/session').then((r) => r.json()).then((s) => fetch('/api/operator', { method: 'POST',
                  headers: { 'Content-Type': 'application/json', 'X-CaptureFleet-CSRF': s.csrf_token },
                  body: JSON.stringify({ changeConsent: { deviceId: '\(devices[0])', action: 'CONSENT_ACTION_REVOKE', reason: 'x' } }) }))
                  .then((r) => r.json()).then((reply) => reply.status.code)
                """) as? String
            #expect(asViewer == "STATUS_CODE_PERMISSION_DENIED")
            try await fleet.waitUntil("/metrics counts the forgery (refreshed once a second)", seconds: 5) {
                (try SecondLaneIntegrationTests.MetricsTests.scrape(fleet).value("capfleet_rejected_messages_total", ["endpoint": "dashboard", "reason": "forged_request"]) ?? 0) >= 1
            }
            #expect(try fleet.json(["devices"]).first { $0["device_id"] as? String == devices[0] }?["consent"] as? String == "authorized")

            // Signed out: the cookie is refused. The viewer's operator removed: theirs too, and
            // their page's live connection is told so and closed.
            _ = try page.evaluate("document.getElementById('signout').click(); true")
            try await page.waitUntil("the signed-out page says so", seconds: 10, "document.body.classList.contains('signed-out')")
            #expect(try page.evaluate("fetch('/api/session').then((r) => r.status)") as? Double == 401)
            #expect(try fleet.cli(["operator", "remove", "vi"]).status == 0)
            try await viewer.waitUntil("the viewer's page is signed out", seconds: 10, "document.body.classList.contains('signed-out')")
            #expect(try viewer.evaluate("fetch('/api/session').then((r) => r.status)") as? Double == 401)
        }
    }
}

extension HeadlessChromium.Page {
    /// The dashboard's address without its fragment.
    func baseURL(from href: String?) -> String { String((href ?? "").split(separator: "#").first ?? "") }
}
