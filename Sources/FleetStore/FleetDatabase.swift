import FleetCore
import Foundation
import GRDB

/// The coordinator's fleet state in one SQLite file (WAL): nodes, devices, formats,
/// connection history and the audit log. Owns the only `DatabaseWriter` of the process,
/// runs the migrations on open, and offers intent-named writes that keep each invariant
/// in one transaction. GRDB runs every access on its own serial queues, so callers in
/// async code never block the cooperative pool on disk I/O.
public final class FleetDatabase: Sendable {
    public let path: String
    let writer: any DatabaseWriter

    /// A database in memory, for tests of the services that write it: the same schema,
    /// migrations and intent-named writes as a file, without the file.
    public static func inMemory() throws(StoreError) -> FleetDatabase {
        try FleetDatabase(inMemory: ())
    }

    private init(inMemory: Void) throws(StoreError) {
        path = ":memory:"
        do {
            var configuration = Configuration()
            configuration.foreignKeysEnabled = true
            writer = try DatabaseQueue(configuration: configuration)
            try FleetSchema.migrator.migrate(writer)
        } catch {
            throw StoreError.openFailed(path: path, underlying: error)
        }
    }

    public init(path: String) throws(StoreError) {
        self.path = path
        do {
            var configuration = Configuration()
            configuration.foreignKeysEnabled = true
            configuration.busyMode = .timeout(5)
            // Another process (`capfleet enroll --data` beside a starting coordinator) may be
            // opening the same file: switching it to WAL and migrating it are safe within a
            // process, not across, so opening is one process at a time.
            let lock = open(path + ".migrate-lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            if lock >= 0 { flock(lock, LOCK_EX) }
            defer { if lock >= 0 { flock(lock, LOCK_UN); close(lock) } }
            writer = try DatabasePool(path: path, configuration: configuration)
            try FleetSchema.migrator.migrate(writer)
        } catch {
            throw StoreError.openFailed(path: path, underlying: error)
        }
    }

    func write<T: Sendable>(_ what: String, _ body: @Sendable @escaping (Database) throws -> T) async throws(StoreError) -> T {
        do {
            return try await writer.write(body)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.queryFailed(operation: what, path: path, underlying: error)
        }
    }

    func read<T: Sendable>(_ what: String, _ body: @Sendable @escaping (Database) throws -> T) async throws(StoreError) -> T {
        do {
            return try await writer.read(body)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.queryFailed(operation: what, path: path, underlying: error)
        }
    }
}

/// A store failure, naming the database file and the operation, with SQLite's (or the
/// system's) error as it came, so callers can ask it (`isLocked`) instead of reading words.
public enum StoreError: Error, CustomStringConvertible, Sendable {
    case openFailed(path: String, underlying: any Error)
    case queryFailed(operation: String, path: String, underlying: any Error)
    case notFound(what: String)
    case refused(reason: String)

    public var description: String {
        switch self {
        case let .openFailed(path, underlying):
            "cannot open the fleet database \(path): \(underlying). Check that the data directory exists and is writable, and that no other coordinator uses it."
        case let .queryFailed(operation, path, underlying):
            "\(operation) failed on \(path): \(underlying)"
        case let .notFound(what):
            "\(what) not found"
        case let .refused(reason):
            reason
        }
    }
}

/// Milliseconds since 1970, the store's time unit.
public typealias UnixMilliseconds = Int64

extension Date {
    public var unixMilliseconds: UnixMilliseconds { UnixMilliseconds((timeIntervalSince1970 * 1000).rounded()) }
}
