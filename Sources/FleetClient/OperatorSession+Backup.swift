import FleetProtocol
import FleetRecording
import Foundation

/// A copy of the fleet database on this machine, its SHA-256 checked against the coordinator's.
public struct DownloadedBackup: Sendable {
    public var path: String
    public var size: UInt64
    public var sha256: String
    public var schemaVersion: UInt32
    public var takenUnixMs: Int64
}

extension OperatorSession {
    /// Fetches a new consistent snapshot of the running coordinator's fleet database (SQLite's
    /// online backup, admin) into `destination`, replacing what is there only once every byte
    /// has arrived and the SHA-256 matches: until then it is DESTINATION.partial, removed if
    /// the download fails.
    public func downloadBackup(
        to destination: String, chunkBytes: UInt32 = 1 << 20,
        progress: (TransferProgress) -> Void = { _ in }
    ) throws -> DownloadedBackup {
        let partial = destination + ".partial"
        var snapshot: Capfleet_V1_BackupChunk?
        let received: UInt64
        do {
            received = try ChunkedDownload.write(
                to: partial, cannotCreateHint: "check that its directory exists and is writable",
                fetch: { offset in
                    // Without an id the coordinator takes the snapshot and answers with its first chunk.
                    let chunk = try call(
                        .backupDatabase(
                            .with {
                                if let snapshot {
                                    $0.backupID = snapshot.backupID
                                    $0.offset = offset
                                    $0.length = chunkBytes
                                }
                            })
                    ).reply.backup
                    if snapshot == nil {
                        snapshot = chunk
                        progress(.started(total: chunk.size))
                    }
                    return ChunkedDownload.Chunk(bytes: chunk.data, total: snapshot?.size ?? chunk.size)
                }, advanced: { progress(.advanced(done: $0)) })
        } catch {
            // A .partial that could not be created is not ours to remove (it may be a directory).
            if case .cannotCreate? = error as? TransferError { throw error }
            Self.discard(partial)
            throw error
        }
        progress(.finished)
        guard let snapshot else { preconditionFailure("a chunked download fetches its first chunk before it ends") }
        let digest = try SegmentDigest.sha256(ofFile: partial)
        guard received == snapshot.size, digest == snapshot.sha256 else {
            Self.discard(partial)
            throw TransferError.backupDamaged(received: received, size: snapshot.size, sha256: digest, expected: snapshot.sha256)
        }
        // rename(2) replaces the destination in one step: no moment without a backup there.
        guard rename(partial, destination) == 0 else {
            throw TransferError.cannotPlace(path: partial, destination: destination, errno: errno)
        }
        return DownloadedBackup(
            path: destination, size: snapshot.size, sha256: snapshot.sha256,
            schemaVersion: snapshot.schemaVersion, takenUnixMs: snapshot.takenUnixMs)
    }

    /// Removes a download that is given up on. The error that stopped it is what the caller
    /// reports; a leftover .partial file is named as one and replaced by the next attempt.
    static func discard(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }
}
