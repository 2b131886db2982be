import Foundation
import Testing

@testable import FleetCoordinator

/// The dashboard's files are embedded in the binary by scripts/embed-dashboard-assets.py;
/// an edit under dashboard/ without running it would ship the old page.
@Suite struct DashboardAssetsTests {
    @Test func theEmbeddedFiles_areThoseOfTheDashboardFolder() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("dashboard")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(DashboardAssets.files.keys.sorted() == names, "run scripts/embed-dashboard-assets.py")
        for name in names {
            let bytes = try Array(Data(contentsOf: folder.appendingPathComponent(name)))
            #expect(DashboardAssets.files[name]?.bytes == bytes, "\(name) changed: run scripts/embed-dashboard-assets.py")
        }
        #expect(DashboardAssets.files["app.js"]?.contentType == "text/javascript; charset=utf-8")
    }
}
