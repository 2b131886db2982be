import FleetCore

/// A place takes are offloaded to (`capfleet storage add`): one of rclone's backends, its
/// settings, the settings that are secrets (kept apart, handed only to the hosts that upload)
/// and the folder on it the fleet's takes go under. The project speaks no storage protocol of
/// its own: rclone does, from Debian's package.
public struct StorageDestination: Sendable, Equatable {
    /// rclone's backends a studio's storage is reached by.
    public static let backends: Set<String> = [
        "s3", "sftp", "webdav", "smb", "ftp", "local", "google cloud storage", "azureblob", "b2", "swift",
    ]

    public let name: String
    public let backend: String
    public let options: [String: String]
    public let secrets: [String: String]
    public let layout: OffloadLayout

    public init(
        name: String, backend: String, options: [String: String], secrets: [String: String], root: String
    )
        throws(StorageDestinationError)
    {
        guard !name.isEmpty, name.count <= 32, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
        else {
            throw .badName(name)
        }
        guard Self.backends.contains(backend) else { throw .unknownBackend(backend) }
        for key in Array(options.keys) + Array(secrets.keys) {
            guard !key.isEmpty, key.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_") }) else { throw .badKey(key) }
        }
        if let both = options.keys.first(where: { secrets[$0] != nil }) { throw .givenTwice(both) }
        self.name = name
        self.backend = backend
        self.options = options
        self.secrets = secrets
        self.layout = OffloadLayout(root: root)
    }

    /// rclone's settings that it keeps obscured in its configuration, so a plain one given
    /// here is obscured (`rclone obscure`) before rclone reads it.
    public static let obscuredKeys: Set<String> = ["pass", "password", "password2", "key_file_pass"]

    /// The remote as rclone reads it from its environment (RCLONE_CONFIG_NAME_KEY), under the
    /// name `remote`, with `obscured` in place of the plain secrets it lists.
    func environment(remote: String, obscured: [String: String]) -> [String: String] {
        let prefix = "RCLONE_CONFIG_\(remote.uppercased())_"
        var environment = [prefix + "TYPE": backend]
        for (key, value) in options { environment[prefix + key.uppercased()] = value }
        for (key, value) in secrets { environment[prefix + key.uppercased()] = obscured[key] ?? value }
        return environment
    }
}

/// A destination refused as given, and how to give it.
public enum StorageDestinationError: Error, Equatable, CustomStringConvertible {
    case badName(String)
    case unknownBackend(String)
    case badKey(String)
    case givenTwice(String)

    public var description: String {
        switch self {
        case .badName(let name):
            "storage name '\(name)': use 1 to 32 letters, digits, '-' or '_'"
        case .unknownBackend(let backend):
            "storage backend '\(backend)' is not one rclone offers here; use one of \(StorageDestination.backends.sorted().joined(separator: ", "))"
        case .badKey(let key):
            "setting '\(key)': rclone's settings are lower case letters, digits and '_' (e.g. url, user, pass, vendor)"
        case .givenTwice(let key):
            "setting '\(key)' is given both as --option and as --secret: give it once"
        }
    }
}
