import FleetCore
import Foundation

/// A setting the daemons cannot start with: which one, and what to write instead. Printed as
/// it is by `capfleet coordinator` and `capfleet agent` (and their `--check-config`).
public struct SettingsError: Error, CustomStringConvertible, Equatable, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension SettingsFile {
    /// The settings file at `path`, every key checked against `knownKeys`; no file, no
    /// settings (every value then comes from the environment or the defaults).
    public static func read(path: String?, knownKeys: [String]) throws -> SettingsFile {
        guard let path else { return SettingsFile() }
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw SettingsError("cannot read the settings file \(path): check the path")
        }
        return try SettingsFile(text: text, path: path, knownKeys: knownKeys)
    }

    /// A value that says nothing when empty: `name =` in a file leaves the default.
    func nonEmpty(_ key: String, environment: [String: String]) -> String? {
        value(key, environment: environment).flatMap { $0.isEmpty ? nil : $0 }
    }
}
