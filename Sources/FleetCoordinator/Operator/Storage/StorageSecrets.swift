import FleetBus
import Foundation

/// The secret settings of the storage destinations (recordings.md, "Offload"): one 0600 file
/// per destination in a 0700 folder beside the coordinator's key, never in the database, whose
/// backups travel. Blocking file I/O, a few hundred bytes, once per change or offload.
struct StorageSecrets: Sendable {
    let directory: String

    func path(_ name: String) -> String { directory + "/\(name).json" }

    func save(_ secrets: [String: String], for name: String) throws(StorageSecretsError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let text: String
        do {
            text = String(decoding: try encoder.encode(secrets), as: UTF8.self)
        } catch {
            throw .unwritable(name, "\(error)")
        }
        do {
            try SecretFile.write(text, path: path(name))
        } catch {
            throw .unwritable(name, String(cString: strerror(error.errno)))
        }
    }

    /// The destination's secrets; an empty set when none were kept.
    func load(_ name: String) throws(StorageSecretsError) -> [String: String] {
        guard FileManager.default.fileExists(atPath: path(name)) else { return [:] }
        do {
            return try JSONDecoder().decode([String: String].self, from: Data(contentsOf: URL(fileURLWithPath: path(name))))
        } catch {
            throw .unreadable(name, "\(error)")
        }
    }

    func remove(_ name: String) throws(StorageSecretsError) {
        guard unlink(path(name)) == 0 || errno == ENOENT else { throw .unwritable(name, String(cString: strerror(errno))) }
    }
}

/// A destination's secrets could not be kept or read, and where to look.
enum StorageSecretsError: Error, CustomStringConvertible {
    case unwritable(String, String)
    case unreadable(String, String)

    var description: String {
        switch self {
        case .unwritable(let name, let reason):
            "could not keep storage destination \(name)'s secrets in the coordinator's keys folder: \(reason)"
        case .unreadable(let name, let reason):
            "could not read storage destination \(name)'s secrets (keys/storage/\(name).json in the coordinator's data folder): \(reason)"
        }
    }
}
