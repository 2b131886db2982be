import FleetCore
import FleetRecording
import FleetStore
import FleetSystem
import Foundation
import Synchronization

/// Snapshots of the fleet database that operators fetch with `capfleet backup`: each one a
/// consistent online copy in DATA/backups, read a chunk at a time, removed once its last
/// chunk has gone out or after 15 minutes (an abandoned fetch leaves nothing behind for long).
final class DatabaseBackups: Sendable {
    struct Snapshot: Sendable {
        var id: String
        var path: String
        var size: UInt64
        var sha256: String
        var schemaVersion: Int
        var takenUnixMs: Int64
    }

    /// A snapshot written but not measured: the operator is told, and no backup is offered.
    struct Unreadable: Error, CustomStringConvertible {
        let path: String
        let doing: String
        let reason: String
        var description: String { "the backup \(path) was written but \(doing) failed: \(reason)" }
    }

    static let keptSeconds: Int64 = 15 * 60
    static let largestChunk = 1 << 20

    let directory: String
    private let store: FleetDatabase
    private let clock: CoordinatorClock
    private let snapshots = Mutex<[String: Snapshot]>([:])

    init(dataDirectory: String, store: FleetDatabase, clock: CoordinatorClock) {
        directory = dataDirectory + "/backups"
        self.store = store
        self.clock = clock
        // Snapshots of an earlier run are nobody's any more. Absent on a first run; one that
        // cannot be removed only takes space, since new snapshot ids never collide with it.
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A new snapshot of the database as it is now.
    func take() async throws -> Snapshot {
        expire()
        let directory = self.directory
        let taken = clock.unixMilliseconds()
        let id = "backup-\(taken)-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
        let path = directory + "/\(id).sqlite"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let version = try await store.backup(to: path)
        let digest = await OwnedThread.run("cf-backup") { () -> Result<(UInt64, String), Unreadable> in
            let size: UInt64
            do {
                guard let bytes = try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber else {
                    return .failure(Unreadable(path: path, doing: "reading its size", reason: "the file system reports none"))
                }
                size = bytes.uint64Value
            } catch {
                return .failure(Unreadable(path: path, doing: "reading its size", reason: "\(error)"))
            }
            do throws(RecordingError) {
                return .success((size, try SegmentDigest.sha256(ofFile: path)))
            } catch {
                return .failure(Unreadable(path: path, doing: "checksumming it", reason: error.description))
            }
        }
        let (size, sha) = try digest.get()
        let snapshot = Snapshot(id: id, path: path, size: size, sha256: sha, schemaVersion: version, takenUnixMs: taken)
        snapshots.withLock { $0[id] = snapshot }
        return snapshot
    }

    func snapshot(_ id: String) -> Snapshot? {
        expire()
        return snapshots.withLock { $0[id] }
    }

    /// `length` bytes (at most 1 MiB) of a snapshot from `offset`; the snapshot goes once its
    /// last byte has been read.
    func read(_ snapshot: Snapshot, offset: UInt64, length: Int) async throws -> Data {
        let length = length <= 0 ? Self.largestChunk : min(length, Self.largestChunk)
        let path = snapshot.path
        let data = try await OwnedThread.run("cf-backup") { () -> Result<Data, CocoaError> in
            guard let handle = FileHandle(forReadingAtPath: path) else { return .failure(CocoaError(.fileReadNoSuchFile)) }
            // Closing a file opened for reading cannot lose data.
            defer { try? handle.close() }
            do {
                try handle.seek(toOffset: min(offset, snapshot.size))
                return .success(try handle.read(upToCount: length) ?? Data())
            } catch {
                return .failure(CocoaError(.fileReadUnknown))
            }
        }.get()
        if offset + UInt64(data.count) >= snapshot.size { remove(snapshot.id) }
        return data
    }

    private func remove(_ id: String) {
        guard let gone = snapshots.withLock({ $0.removeValue(forKey: id) }) else { return }
        // A file that cannot be removed is gone at the next start, with the whole directory.
        try? FileManager.default.removeItem(atPath: gone.path)
    }

    private func expire() {
        let cutoff = clock.unixMilliseconds() - Self.keptSeconds * 1000
        let old = snapshots.withLock { $0.values.filter { $0.takenUnixMs < cutoff }.map(\.id) }
        for id in old { remove(id) }
    }
}
