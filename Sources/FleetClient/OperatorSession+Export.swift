import FleetProtocol
import FleetRecording
import Foundation

/// A take's files copied to this machine, each checked against the SHA-256 in the index.
public struct ExportedTake: Sendable {
    public var take: String
    public var files: [String]
    public var bytes: UInt64
    /// Segments still being written when the export began ("DEVICE #N"): not exported.
    public var stillOpen: [String] = []
    /// The take as the index had it when the export began.
    public var info: Capfleet_V1_TakeInfo
}

extension OperatorSession {
    /// Copies every finished segment of `take` into DIRECTORY/DEVICE/FILE, a chunk at a time,
    /// and checks each file against the index's SHA-256 as soon as it is complete: the first
    /// that differs stops the export, saying which. A segment just finished is checksummed by
    /// the coordinator a moment later: the export waits for those checksums, up to
    /// `checksumPolls` looks a quarter of a second apart.
    public func exportTake(
        _ take: String, to directory: String, chunkBytes: UInt32 = 1 << 20, checksumPolls: Int = 240,
        progress: (TransferProgress) -> Void = { _ in }
    ) throws -> ExportedTake {
        let info = try takeWithChecksums(take, polls: checksumPolls)
        // An open segment is still being written: its bytes and checksum are not final.
        let segments = info.segments.filter { $0.state != "open" }
        guard !segments.isEmpty else { throw TransferError.nothingToExport(take: take) }
        progress(.started(total: segments.reduce(UInt64(0)) { $0 + $1.sizeBytes }))
        var done: UInt64 = 0
        var written: [String] = []
        for segment in segments {
            let folder = directory + "/" + segment.deviceID
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let path = folder + "/" + (segment.path as NSString).lastPathComponent
            let finished = done
            done += try ChunkedDownload.write(
                to: path, cannotCreateHint: "check that \(directory) is writable",
                fetch: { offset in
                    let reply = try call(
                        .readSegment(
                            .with {
                                $0.takeID = take
                                $0.deviceID = segment.deviceID
                                $0.segmentNumber = segment.number
                                $0.offset = offset
                                $0.length = chunkBytes
                            })
                    ).reply
                    return ChunkedDownload.Chunk(bytes: reply.segmentData, total: reply.segmentSize)
                }, advanced: { progress(.advanced(done: finished + $0)) })
            let digest = try SegmentDigest.sha256(ofFile: path)
            guard digest == segment.sha256 else {
                throw TransferError.segmentDamaged(path: path, sha256: digest, expected: segment.sha256, take: take)
            }
            written.append(path)
        }
        progress(.finished)
        // The take's sync and integrity report travels with its files (recordings.md).
        if info.hasSyncReport {
            let path = directory + "/sync-report.json"
            do {
                try Data((try FleetTables.json(TakeSyncViews.Report(info.syncReport)) + "\n").utf8).write(to: URL(fileURLWithPath: path))
            } catch {
                throw TransferError.cannotCreate(path: path, hint: "check that \(directory) is writable (\(error))")
            }
            written.append(path)
        }
        let open = info.segments.filter { $0.state == "open" }.map { "\($0.deviceID) #\($0.number)" }
        return ExportedTake(take: take, files: written, bytes: done, stillOpen: open, info: info)
    }

    /// The take as the index has it once every finished segment has its SHA-256 there (counted
    /// in looks, so that no clock reading decides when to give up), or why not.
    private func takeWithChecksums(_ take: String, polls: Int) throws -> Capfleet_V1_TakeInfo {
        var looks = 0
        while true {
            guard let info = try call(.getRecording(.with { $0.takeID = take })).reply.takes.first else {
                throw TransferError.noTake(take)
            }
            let unchecked = info.segments.filter { $0.state != "open" && $0.sha256.isEmpty }
            if unchecked.isEmpty { return info }
            guard looks < polls else {
                throw TransferError.checksumsPending(take: take, segments: unchecked.map { "\($0.deviceID) #\($0.number)" }, seconds: polls / 4)
            }
            looks += 1
            usleep(250_000)
        }
    }
}
