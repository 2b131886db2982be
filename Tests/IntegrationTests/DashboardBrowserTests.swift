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

        /// Records, from before the page's own script runs, what the page says of its connection
        /// and of the fleet each time either changes: `window.seenStates`, `[connection, summary, tiles]`.
        static let stateRecorder = """
            window.seenStates = [];
            new MutationObserver(() => {
              const connection = document.getElementById('connection'), summary = document.getElementById('summary');
              if (!connection || !summary) return;
              const seen = [connection.textContent, summary.textContent, document.querySelectorAll('.tile').length];
              const last = window.seenStates[window.seenStates.length - 1];
              if (!last || last[0] !== seen[0] || last[1] !== seen[1] || last[2] !== seen[2]) window.seenStates.push(seen);
            }).observe(document, { subtree: true, childList: true, characterData: true });
            """

        /// The captions of the tiles of one node, in the page's order.
        static func tileCaptions(node: String) -> String {
            """
            [...document.querySelectorAll('.node[data-node="\(node)"] .tile')].map((t) => ({
              node: t.querySelector('.node-name').textContent, name: t.querySelector('.name').textContent,
              id: t.querySelector('.device-id').textContent, shown: t.getClientRects().length > 0 }))
            """
        }

        /// How many tiles of the page's current size fit in its window, the tiles laid out as
        /// they are (the grid's columns, a tile's height) below the toolbar and two node headings.
        static let tilesThatFit = """
            (() => { const tile = document.querySelector('.tile').getBoundingClientRect();
              const grid = document.querySelector('.grid');
              const gap = parseFloat(getComputedStyle(grid).rowGap) || 0;
              const heading = document.querySelector('.node h2').getBoundingClientRect().height;
              const top = document.getElementById('nodes').getBoundingClientRect().top + window.scrollY;
              const columns = getComputedStyle(grid).gridTemplateColumns.split(' ').length;
              return columns * Math.floor((innerHeight - top - 2 * heading + gap) / (tile.height + gap)); })()
            """

        /// Whether the element is on the page for a person to see (not hidden, displayed).
        static func visible(_ selector: String) -> String {
            "(() => { const e = document.querySelector('\(selector)'); return Boolean(e) && e.getClientRects().length > 0; })()"
        }

        /// Types `text` in the input `id` as a person would (the page listens to "input").
        static func type(_ text: String, into id: String) -> String {
            "(() => { const e = document.getElementById('\(id)'); e.value = '\(text)'; e.dispatchEvent(new Event('input')); return true; })()"
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
            // Eleven cameras of one node, named as the other nodes' are: their order ("camera 2"
            // before "camera 10"), the filter, a node's select and consent for many at once.
            try fleet.startAgent("stage-crowd", synthetic: 11, fps: 2)
            try await fleet.waitUntil("fourteen cameras register", seconds: 30) { try fleet.json(["devices"]).count == 14 }
            let nodeIDs = Dictionary(
                uniqueKeysWithValues: try fleet.nodes().compactMap { node in
                    (node["name"] as? String).flatMap { name in (node["node_id"] as? String).map { (name, $0) } }
                })
            let crowdNode = try #require(nodeIDs["stage-crowd"])
            let registered = try fleet.json(["devices"])
            let crowd = registered.filter { $0["node_id"] as? String == crowdNode }
                .sorted { ($0["name"] as? String ?? "").compare($1["name"] as? String ?? "", options: .numeric) == .orderedAscending }
                .compactMap { $0["device_id"] as? String }
            let devices = registered.filter { $0["node_id"] as? String != crowdNode }.compactMap { $0["device_id"] as? String }.sorted()
            // Two cameras shown from the start; the third's consent is granted from the page.
            try fleet.grantConsent(devices[0])
            try fleet.grantConsent(devices[1])
            let hidden = devices[2]
            // A camera as the page names it: its node's name and its own.
            let nodeNames = Dictionary(uniqueKeysWithValues: nodeIDs.map { ($1, $0) })
            func label(_ id: String) -> String {
                let device = registered.first { $0["device_id"] as? String == id } ?? [:]
                return "\(nodeNames[device["node_id"] as? String ?? ""] ?? "?") · \(device["name"] as? String ?? "?") (\(id))"
            }

            let browser = try HeadlessChromium(directory: fleet.directory)
            defer { browser.stop() }
            let page = try browser.newPage()
            // The window the issue measured the grid in.
            try page.command("Emulation.setDeviceMetricsOverride", ["width": 1600, "height": 857, "deviceScaleFactor": 1, "mobile": false])
            try page.command("Page.addScriptToEvaluateOnNewDocument", ["source": Self.stateRecorder])
            try page.navigate(try Self.signInURL(fleet, as: "bo"))
            try await page.waitUntil("the grid shows every camera", seconds: 20, "document.querySelectorAll('.tile').length === 14")
            try await page.waitUntil("the live connection is up", seconds: 10, "document.getElementById('connection').textContent === 'live'")
            #expect(try page.evaluate("document.getElementById('who').textContent") as? String == "bo (operator)")
            // Until the first update the page says it is loading, never "0 cameras", and "live"
            // comes with the fleet, not before it.
            let seen = try page.evaluate("window.seenStates") as? [[Any]] ?? []
            #expect(seen.first { !($0[1] as? String ?? "").isEmpty }?[1] as? String == "Loading the fleet…", "\(seen)")
            #expect(!seen.contains { ($0[1] as? String ?? "").hasPrefix("0 cameras") }, "\(seen)")
            #expect(!seen.contains { $0[0] as? String == "live" && ($0[2] as? Double ?? 0) == 0 }, "live before any camera is shown: \(seen)")

            // Tiles by node in natural order, each titled by its node and camera with its device
            // id; the nodes in name order.
            #expect(
                try page.evaluate("[...document.querySelectorAll('.node')].map((n) => n.dataset.node).join(' ')") as? String
                    == [crowdNode, nodeIDs["stage-left"] ?? "", nodeIDs["stage-right"] ?? ""].joined(separator: " "))
            let captions = try page.evaluate(Self.tileCaptions(node: crowdNode)) as? [[String: Any]] ?? []
            #expect(captions.map { $0["name"] as? String ?? "" } == (1...11).map { "Synthetic camera \($0)" }, "\(captions)")
            #expect(captions.map { $0["id"] as? String ?? "" } == crowd && captions.allSatisfy { $0["node"] as? String == "stage-crowd" })
            // Smaller tiles than the 12 a window held: medium holds thirty and more, small fifty.
            let medium = try page.evaluate(Self.tilesThatFit) as? Double ?? 0
            _ = try page.evaluate(
                "(() => { const s = document.getElementById('tile-size'); s.value = 'small'; s.dispatchEvent(new Event('change')); return true; })()")
            let small = try page.evaluate(Self.tilesThatFit) as? Double ?? 0
            #expect(medium >= 30 && small >= 50, "tiles that fit 1600x857: medium \(medium), small \(small)")
            try page.screenshot(to: Self.screenshots + "/dashboard-fleet-small.png")
            _ = try page.evaluate(
                "(() => { const s = document.getElementById('tile-size'); s.value = 'medium'; s.dispatchEvent(new Event('change')); return true; })()"
            )

            // The previews flow: granted cameras show the test pattern, and its burned-in frame
            // number changes the picture from one preview to the next.
            for device in devices.prefix(2) {
                _ = try page.evaluate("document.querySelector('.tile[data-device=\"\(device)\"]').scrollIntoView(); true")
                try await page.waitUntil("\(device)'s preview shows", seconds: 20, "(\(Self.tilePicture(device))).luma > 20")
            }
            // On screen, where previews load (the crowd's tiles come first).
            _ = try page.evaluate("document.querySelector('.tile[data-device=\"\(devices[0])\"]').scrollIntoView(); true")
            let before = try Self.picture(page, devices[0])
            try await page.waitUntil("\(devices[0])'s preview changes", seconds: 10, "(\(Self.tilePicture(devices[0]))).hash !== \(Int(before.hash))")
            _ = try page.evaluate("document.querySelector('.tile[data-device=\"\(hidden)\"]').scrollIntoView(); true")
            try await page.waitUntil("\(hidden)'s preview shows", seconds: 20, "(\(Self.tilePicture(hidden))).luma >= 0")
            #expect(try Self.picture(page, hidden).luma < 3, "a camera without consent is black on the page")
            try page.screenshot(to: Self.screenshots + "/dashboard-fleet.png")

            // The filter: words of a node, a camera, a device id.
            _ = try page.evaluate(Self.type("stage-left", into: "fleet-filter"))
            try await page.waitUntil(
                "the filter shows stage-left's two cameras", seconds: 5,
                "[...document.querySelectorAll('.tile')].filter((t) => t.getClientRects().length).length === 2")
            _ = try page.evaluate(Self.type(hidden, into: "fleet-filter"))
            try await page.waitUntil(
                "the filter shows one camera by its device id", seconds: 5,
                "[...document.querySelectorAll('.tile')].filter((t) => t.getClientRects().length).map((t) => t.dataset.device).join() === '\(hidden)'"
            )
            #expect(
                try page.evaluate("document.querySelectorAll('.node:not([hidden])').length") as? Double == 1, "nodes with no camera shown are hidden")
            // Select all shown, then a node's box; consent granted to the selection, one request each.
            _ = try page.evaluate(Self.type("stage-crowd", into: "fleet-filter"))
            _ = try page.evaluate("document.getElementById('select-shown').click(); true")
            try await page.waitUntil("the crowd is selected", seconds: 5, "document.getElementById('selection-count').textContent === '11 selected'")
            _ = try page.evaluate(Self.type("", into: "fleet-filter"))
            _ = try page.evaluate("document.getElementById('select-none').click(); true")
            // The boxes are drawn at the next frame: clicked before it, they would toggle what was.
            try await page.waitUntil("nothing is selected", seconds: 5, "document.getElementById('selection-count').textContent === 'none selected'")
            _ = try page.evaluate("document.querySelector('.node[data-node=\"\(crowdNode)\"] input.node-select').click(); true")
            try await page.waitUntil(
                "the node's box selects its cameras", seconds: 5,
                """
                document.getElementById('selection-count').textContent === '11 selected' &&
                  [...document.querySelectorAll('.tile input.select')].filter((b) => b.checked).length === 11
                """)
            _ = try page.evaluate(
                """
                document.getElementById('bulk-reason').value = 'crowd scene, release forms signed';
                document.getElementById('bulk-grant').click(); true
                """)
            do {
                try await page.waitUntil(
                    "each camera's grant is listed", seconds: 45,
                    "document.querySelectorAll('#bulk-results li.ok').length === 11")
            } catch {
                let shown = try page.evaluate(
                    "document.getElementById('bulk-results').textContent + ' | ' + document.getElementById('problem').textContent")
                try page.screenshot(to: Self.screenshots + "/dashboard-bulk-consent.png")
                throw HarnessError("\(error); the page shows: \(shown ?? "")")
            }
            #expect(try page.evaluate("document.getElementById('bulk-title').textContent") as? String == "Grant consent: 11 of 11 answered")
            let crowdConsent = try fleet.json(["devices"]).filter { $0["node_id"] as? String == crowdNode }.map { $0["consent"] as? String ?? "" }
            #expect(crowdConsent == Array(repeating: "authorized", count: 11), "\(crowdConsent)")
            let crowdHistory = try fleet.cli(["consent", "history", crowd[10]])
            #expect(
                crowdHistory.output.contains("bo via dashboard") && crowdHistory.output.contains("release forms signed"), "\(crowdHistory.output)")
            // A revocation of two: one had consent, one never did; each answer is shown.
            _ = try page.evaluate("document.getElementById('select-none').click(); true")
            try await page.waitUntil("nothing is selected", seconds: 5, "document.getElementById('selection-count').textContent === 'none selected'")
            _ = try page.evaluate(
                """
                (() => { for (const id of ['\(crowd[0])', '\(hidden)']) document.querySelector(`.tile[data-device="${id}"] input.select`).click();
                  document.getElementById('bulk-revoke').click(); return true; })()
                """)
            try await page.waitUntil(
                "both answers are listed", seconds: 20,
                "document.querySelectorAll('#bulk-results li.ok, #bulk-results li.refused').length === 2")
            let revoked = try page.evaluate("document.querySelector('#bulk-results li[data-device=\"\(crowd[0])\"]').className") as? String
            let refusal = try page.evaluate("document.querySelector('#bulk-results li[data-device=\"\(hidden)\"]').textContent") as? String ?? ""
            #expect(revoked == "ok" && refusal.contains("\(label(hidden)): refused: there is no consent to revoke"), "\(refusal)")
            try page.screenshot(to: Self.screenshots + "/dashboard-bulk-consent.png")
            _ = try page.evaluate("document.getElementById('select-none').click(); document.getElementById('bulk-close').click(); true")

            // Consent granted from the consent page turns its tile from black to the test pattern.
            try page.navigate(page.baseURL(from: try page.evaluate("location.href") as? String) + "#consent")
            try await page.waitUntil(
                "the consent page lists the cameras", seconds: 10, "document.querySelectorAll('#consent-devices tbody tr').length === 14")
            _ = try page.evaluate(
                """
                (() => { const row = document.querySelector('#consent-devices tr[data-device="\(hidden)"]');
                  row.querySelector('input.reason').value = 'scene cleared with the crew';
                  row.querySelector('button.consent-grant').click(); return true; })()
                """)
            try await page.waitUntil(
                "the history shows the grant", seconds: 15,
                "document.querySelector('#consent-all-history tbody').textContent.includes('scene cleared with the crew')")
            try page.navigate(try page.evaluate("location.href.split('#')[0]") as! String + "#fleet")
            _ = try page.evaluate("document.querySelector('.tile[data-device=\"\(hidden)\"]')?.scrollIntoView(); true")
            try await page.waitUntil("\(hidden)'s tile shows the test pattern", seconds: 20, "(\(Self.tilePicture(hidden))).luma > 20")
            let history = try fleet.cli(["consent", "history", hidden])
            #expect(history.output.contains("bo via dashboard") && history.output.contains("scene cleared with the crew"), "\(history.output)")

            // The camera page: the lease taken and a zoom set from the page show in the frames.
            let base = try page.evaluate("location.href.split('#')[0]") as? String ?? ""
            try page.navigate(base + "#camera/" + devices[0])
            try await page.waitUntil("the camera page lists its formats", seconds: 15, "document.querySelectorAll('#formats tbody tr').length > 0")
            // The zoom input knows the active format's range (synthetic formats zoom to 8x).
            try await page.waitUntil("the zoom range shows", seconds: 10, "document.getElementById('zoom-range').textContent.startsWith('(1x–8x')")
            #expect(
                try page.evaluate("[document.getElementById('zoom-factor').min, document.getElementById('zoom-factor').max].join()") as? String
                    == "1,8")
            // Nobody holds the lease: only "Take the lease"; a change refused for want of it says so.
            #expect(try page.evaluate(Self.visible("#lease-take")) as? Bool == true)
            #expect(try page.evaluate(Self.visible("#lease-give")) as? Bool == false)
            _ = try page.evaluate("document.getElementById('zoom-factor').value = '2'; document.getElementById('zoom-set').click(); true")
            try await page.waitUntil(
                "the refusal points at the page's lease button", seconds: 10,
                "document.getElementById('problem').textContent.includes('press Take the lease on its camera page first')")
            let leaseRefusal = try page.evaluate("document.getElementById('problem').textContent") as? String ?? ""
            #expect(leaseRefusal.hasPrefix("camera \(label(devices[0])) is not locked") && !leaseRefusal.contains("capfleet"), "\(leaseRefusal)")
            _ = try page.evaluate("document.getElementById('lease-take').click(); true")
            try await page.waitUntil(
                "the page says bo holds the lease", seconds: 10,
                "document.getElementById('camera-lease').textContent.includes('bo via dashboard')")
            try await page.waitUntil(
                "the holder may give it back or keep it longer", seconds: 5,
                "\(Self.visible("#lease-give")) && document.getElementById('lease-take').textContent === 'Keep it 5 more minutes'")
            _ = try page.evaluate("document.getElementById('zoom-factor').value = '2'; document.getElementById('zoom-set').click(); true")
            try await fleet.waitUntil("the frames carry zoom 2", seconds: 15) {
                (try fleet.deviceStats()[devices[0]]?["zoom_factor"] as? Double ?? 1) > 1.99
            }
            try await page.waitUntil("the page shows zoom 2", seconds: 10, "document.getElementById('camera-zoom').textContent.startsWith('2.00x')")
            // The full-rate live view wakes the camera's flow while it is shown, and lets it sleep after.
            _ = try page.evaluate("document.getElementById('live-toggle').click(); true")
            try await page.waitUntil(
                "the live view shows frames", seconds: 20,
                "document.getElementById('camera-preview').src.includes('/api/view/') && document.getElementById('camera-preview').naturalWidth > 0")
            try await fleet.waitUntil("the device's live flow is on for the page", seconds: 10) {
                let device = try fleet.json(["devices"]).first { $0["device_id"] as? String == devices[0] }
                return (device?["live_consumers"] as? [String] ?? []).contains { $0.hasPrefix("dashboard view") }
                    && device?["live_flow"] as? Bool == true
            }
            try page.screenshot(to: Self.screenshots + "/dashboard-camera.png")
            _ = try page.evaluate("document.getElementById('live-toggle').click(); true")
            try await fleet.waitUntil("the live flow sleeps once the view closes", seconds: 15) {
                let device = try fleet.json(["devices"]).first { $0["device_id"] as? String == devices[0] }
                return (device?["live_consumers"] as? [String] ?? []).isEmpty
            }
            _ = try page.evaluate("document.getElementById('lease-give').click(); true")
            try await page.waitUntil(
                "given back, the lease can be taken again", seconds: 10,
                "\(Self.visible("#lease-take")) && !\(Self.visible("#lease-give")) && document.getElementById('lease-take').textContent === 'Take the lease'"
            )
            // Held by someone else: neither button, and who holds it.
            #expect(try fleet.cli(["lock", devices[1]]).status == 0)
            try page.navigate(base + "#camera/" + devices[1])
            try await page.waitUntil(
                "the page says ana holds the lease", seconds: 10,
                """
                document.getElementById('camera-lease').textContent.includes('held by ana') && !\(Self.visible("#lease-take")) && !\(Self.visible("#lease-give"))
                """)

            // A take of two selected cameras started from the page is the CLI's take too.
            try page.navigate(base + "#takes")
            try await page.waitUntil(
                "the takes page lists the cameras", seconds: 10, "document.querySelectorAll('#take-cameras tbody input').length === 14")
            // The picker shows each camera's node, device id and consent.
            let row =
                try page.evaluate(
                    "[...document.querySelector('#take-cameras tr[data-device=\"\(crowd[0])\"]').cells].slice(1).map((c) => c.textContent)")
                as? [String]
            #expect(row == ["stage-crowd", "Synthetic camera 1", crowd[0], "denied: not recorded until granted"], "\(row ?? [])")
            // Filtered to one camera, all shown selected: the take's refusal names it as the
            // picker shows it and points at the page's consent controls.
            // (Its device id would show camera 10 and 11 too: the only camera whose consent was revoked.)
            _ = try page.evaluate(Self.type("denied", into: "take-filter"))
            try await page.waitUntil(
                "the filter leaves one row", seconds: 5,
                "[...document.querySelectorAll('#take-cameras tbody tr')].filter((r) => r.getClientRects().length).length === 1")
            _ = try page.evaluate("document.getElementById('take-select-shown').click(); document.getElementById('take-start').click(); true")
            try await page.waitUntil(
                "the refusal names the camera", seconds: 10,
                "document.getElementById('problem').textContent.includes('stage-crowd · Synthetic camera 1 (\(crowd[0]))')")
            let takeRefusal = try page.evaluate("document.getElementById('problem').textContent") as? String ?? ""
            #expect(takeRefusal.contains("Grant consent") && !takeRefusal.contains("capfleet"), "\(takeRefusal)")
            #expect((try page.evaluate("document.getElementById('take-selection').textContent") as? String ?? "").contains("1 without consent"))
            try page.screenshot(to: Self.screenshots + "/dashboard-takes-picker.png")
            _ = try page.evaluate("document.getElementById('take-select-none').click(); true")
            _ = try page.evaluate(Self.type("", into: "take-filter"))
            _ = try page.evaluate(
                """
                (() => { for (const id of ['\(devices[0])', '\(devices[2])']) document.querySelector(`#take-cameras tr[data-device="${id}"] td.camera`).click();
                  document.getElementById('take-name').value = 'browser-take';
                  document.getElementById('take-start').click(); return true; })()
                """)
            try await page.waitUntil(
                "the page lists the take", seconds: 15, "document.querySelector('#takes tbody').textContent.includes('browser-take')")
            let listed = try fleet.json(["recordings", "list"])
            let take = try #require(listed.first { $0["name"] as? String == "browser-take" }, "\(listed)")
            #expect(take["created_by"] as? String == "bo via dashboard", "\(take)")
            try await Task.sleep(for: .seconds(2))
            _ = try page.evaluate("document.querySelector('#takes tr[data-take=\"\(take["id"] as? String ?? "")\"] button.operate').click(); true")
            try await fleet.waitUntil("the take stops", seconds: 30) {
                try fleet.json(["recordings", "list"]).first { $0["name"] as? String == "browser-take" }?["state"] as? String == "stopped"
            }
            try await page.waitUntil(
                "the page shows where each part lives", seconds: 10,
                "document.querySelectorAll('#take-parts tbody tr').length === 2")
            // Its sync and integrity report, under the take (recordings.md, "Sync and integrity").
            try await page.waitUntil(
                "the page shows the take's sync report", seconds: 10,
                "document.getElementById('take-sync').textContent.startsWith('Sync: ')")
            try page.screenshot(to: Self.screenshots + "/dashboard-takes.png")

            // A moment of one camera taken from the page: its take and its still's picture, shown together.
            #expect(try fleet.cli(["lock", devices[0]]).status == 0)
            #expect(try fleet.cli(["preroll", devices[0], "3s"]).status == 0)
            _ = try page.evaluate("document.getElementById('take-select-none').click(); true")
            try await Task.sleep(for: .seconds(2))
            _ = try page.evaluate(
                """
                (() => { document.querySelector(`#take-cameras tr[data-device="\(devices[0])"] td.camera`).click();
                  document.getElementById('moment-before').value = '1'; document.getElementById('moment-after').value = '1';
                  document.getElementById('moment-take').click(); return true; })()
                """)
            try await page.waitUntil(
                "the page shows the moment with its take and its picture", seconds: 40,
                """
                document.querySelectorAll('#moments tbody tr').length === 1 && document.querySelectorAll('#take-parts tbody tr').length === 1
                  && [...document.querySelectorAll('#moment-pictures img')].some((image) => image.naturalWidth > 0)
                """)
            let moment = try #require(try fleet.json(["moments"]).first)
            #expect(moment["created_by"] as? String == "bo via dashboard" && moment["devices"] as? [String] == [devices[0]], "\(moment)")
            try page.screenshot(to: Self.screenshots + "/dashboard-moment.png")

            // A viewer, in a browser of their own: no controls; a forged change refused and counted.
            let viewer = try browser.newPage()
            try viewer.navigate(try Self.signInURL(fleet, as: "vi"))
            try await viewer.waitUntil("the viewer sees the grid", seconds: 20, "document.querySelectorAll('.tile').length === 14")
            #expect(try viewer.evaluate(Self.visibleControls) as? Double == 0, "a viewer sees no controls")
            let forged =
                try viewer.evaluate(
                    """
                    fetch('/api/operator', { method: 'POST', headers: { 'Content-Type': 'application/json' },
                      body: JSON.stringify({ changeConsent: { deviceId: '\(devices[0])', action: 'CONSENT_ACTION_REVOKE', reason: 'x' } }) })
                      .then((r) => r.status)
                    """) as? Double
            #expect(forged == 403, "a change without the page's token is refused as a forgery")
            let asViewer =
                try viewer.evaluate(
                    """
                    fetch('/api/session').then((r) => r.json()).then((s) => fetch('/api/operator', { method: 'POST',
                      headers: { 'Content-Type': 'application/json', 'X-CaptureFleet-CSRF': s.csrf_token },
                      body: JSON.stringify({ changeConsent: { deviceId: '\(devices[0])', action: 'CONSENT_ACTION_REVOKE', reason: 'x' } }) }))
                      .then((r) => r.json()).then((reply) => reply.status.code)
                    """) as? String
            #expect(asViewer == "STATUS_CODE_PERMISSION_DENIED")
            try await fleet.waitUntil("/metrics counts the forgery (refreshed once a second)", seconds: 5) {
                (try SecondLaneIntegrationTests.MetricsTests.scrape(fleet).value(
                    "capfleet_rejected_messages_total", ["endpoint": "dashboard", "reason": "forged_request"]) ?? 0) >= 1
            }
            #expect(try fleet.json(["devices"]).first { $0["device_id"] as? String == devices[0] }?["consent"] as? String == "authorized")

            // Signed out: the cookie is refused. The viewer's operator removed: theirs too, and
            // their page's live connection is told so and closed.
            _ = try page.evaluate("document.getElementById('signout').click(); true")
            try await page.waitUntil("the signed-out page says so", seconds: 10, "!!document.body && document.body.classList.contains('signed-out')")
            #expect(try page.evaluate("fetch('/api/session').then((r) => r.status)") as? Double == 401)
            #expect(try fleet.cli(["operator", "remove", "vi"]).status == 0)
            try await viewer.waitUntil(
                "the viewer's page is signed out", seconds: 10, "!!document.body && document.body.classList.contains('signed-out')")
            #expect(try viewer.evaluate("fetch('/api/session').then((r) => r.status)") as? Double == 401)
        }
    }
}

extension HeadlessChromium.Page {
    /// The dashboard's address without its fragment.
    func baseURL(from href: String?) -> String { String((href ?? "").split(separator: "#").first ?? "") }
}
