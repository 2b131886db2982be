import FleetProtocol
import FleetRecording
import Foundation

/// A take's files copied to this machine, each checked against the SHA-256 in the index.
public struct ExportedTake: Sendable {
    public var take: String
    public var files: [String]
    public var bytes: UInt64
}

extension OperatorSession {
    /// Copies every finished segment of `take` into DIRECTORY/DEVICE/FILE, a chunk at a time,
    /// and checks each file against the index's SHA-256 as soon as it is complete: the first
    /// that differs stops the export, saying which.
    public func exportTake(_ take: String, to directory: String, chunkBytes: UInt32 = 1 << 20,
                           progress: (TransferProgress) -> Void = { _ in }) throws -> ExportedTake {
        guard let info = try call(.getRecording(.with { $0.takeID = take })).reply.takes.first else {
            throw TransferError.noTake(take)
        }
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
            done += try ChunkedDownload.write(to: path, cannotCreateHint: "check that \(directory) is writable", fetch: { offset in
                let reply = try call(.readSegment(.with {
                    $0.takeID = take
                    $0.deviceID = segment.deviceID
                    $0.segmentNumber = segment.number
                    $0.offset = offset
                    $0.length = chunkBytes
                })).reply
                return ChunkedDownload.Chunk(bytes: reply.segmentData, total: reply.segmentSize)
            }, advanced: { progress(.advanced(done: finished + $0)) })
            let digest = try SegmentDigest.sha256(ofFile: path)
            guard digest == segment.sha256 else {
                throw TransferError.segmentDamaged(path: path, sha256: digest, expected: segment.sha256, take: take)
            }
            written.append(path)
        }
        progress(.finished)
        return ExportedTake(take: take, files: written, bytes: done)
    }
}
