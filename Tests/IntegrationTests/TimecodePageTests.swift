import FleetCore
import FleetDetection
import FleetImaging
import FleetTestSupport
import Foundation
import Testing

extension IntegrationTests {
    /// The dashboard's timecode page in a real browser: what it draws is read by the agents'
    /// own QR decoder (ZBar, as `sync-audit` reads it) from a screenshot, and says fleet time
    /// and the display's refresh rate.
    @Suite struct TimecodePageTests {
        @Test func theTimecodePage_drawsFleetTime_asACodeTheAuditReads() async throws {
            guard FileManager.default.isExecutableFile(atPath: HeadlessChromium.binary) else {
                Issue.record("no \(HeadlessChromium.binary): scripts/install-deps.sh installs Debian's chromium")
                return
            }
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let browser = try HeadlessChromium(directory: fleet.directory)
            defer { browser.stop() }
            let page = try browser.newPage()
            try page.command("Emulation.setDeviceMetricsOverride", ["width": 800, "height": 600, "deviceScaleFactor": 1, "mobile": false])
            // No sign-in: the page and the fleet time it reads are open to anyone who can see the screen.
            try page.navigate("http://127.0.0.1:\(fleet.metricsPort)/timecode")
            try await page.waitUntil(
                "the page shows fleet time and has measured the display", seconds: 20,
                "document.getElementById('time').textContent.includes('Hz')")
            let shot = fleet.directory + "/timecode.png"
            let before = FleetTimeSource().now()
            try page.screenshot(to: shot)
            let after = FleetTimeSource().now()
            let picture = try PNGDecoder.decode(Array(try Data(contentsOf: URL(fileURLWithPath: shot))))
            var grey = [UInt8](repeating: 0, count: picture.width * picture.height)
            for index in grey.indices { grey[index] = picture.pixels[index * 3 + 1] }
            let codes = try BarcodeScanner(symbologies: [.qr]).scan(GreyImage(width: picture.width, height: picture.height, pixels: grey))
            let texts = codes.map(\.value)
            let timecode = try #require(texts.compactMap { ExposureTimecode(text: $0) }.first, "a timecode in the page's picture: \(texts)")
            guard case let .fleet(shown, refresh) = timecode else {
                Issue.record("a fleet-time code, not \(timecode)")
                return
            }
            print("timecode page: \(timecode.text); this process's fleet time \(before)...\(after)")
            // This process's fleet time and the coordinator's share the machine's clocks: the
            // code shows a time within the screenshot's capture, give or take a second for the
            // browser's frame and a loaded machine.
            #expect(shown + 1_000_000_000 >= before && shown <= after + 1_000_000_000, "shown \(shown), captured \(before)...\(after)")
            #expect(refresh > 1_000 && refresh < 1_000_000, "a display rate between 1 and 1000 Hz, in mHz: \(refresh)")
        }
    }
}
