import Foundation

/// A temporary directory for one test's settings files, removed with the fixture.
final class SettingsFixture {
    let directory: String

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-settings-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    deinit {
        // A leftover temporary directory fails no test.
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Writes `text` into a settings file and returns its path.
    func file(_ name: String, _ text: String) throws -> String {
        let path = directory + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// A file shipped in deploy/, as the package installs it.
    static func shipped(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("deploy/" + name).path
    }
}
