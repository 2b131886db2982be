import FleetProtocol
import FleetRecording
import Foundation

/// A still's pictures copied to this machine, each checked against its SHA-256.
public struct ExportedStill: Sendable {
    public var still: Capfleet_V1_StillInfo
    /// Pictures and sidecars written, in order.
    public var files: [String]
    public var bytes: UInt64
    /// Cameras with no picture, and why ("DEVICE: reason").
    public var missing: [String]
}

/// Why stills could not be fetched whole.
public enum StillTransferError: Error, CustomStringConvertible, Sendable {
    case noStill(String)
    case notStored(still: String, cameras: [String], seconds: Int)
    case damaged(path: String, sha256: String, expected: String)

    public var description: String {
        switch self {
        case let .noStill(id):
            "the coordinator did not describe still \(id)"
        case let .notStored(still, cameras, seconds):
            "still \(still): the pictures of \(cameras.joined(separator: ", ")) were not on the coordinator after \(seconds) s; export again later (capfleet stills export \(still))"
        case let .damaged(path, sha256, expected):
            "\(path): SHA-256 \(sha256) differs from the index's \(expected); export the still again"
        }
    }
}

extension OperatorSession {
    /// Takes a still: answered once every camera's agent has written its pictures; the
    /// coordinator copies them after (`waitForStill`). The coordinator gives each camera the time
    /// to its instant and its bracket, and 30 s plus 20 s a picture to switch formats and encode:
    /// this waits 10 s longer, for its answer.
    public func takeStill(_ query: Capfleet_V1_TakeStill) throws(OperatorClientError) -> Capfleet_V1_OperatorReply {
        let pictures = Double(max(query.bracketEv.count, 1))
        let lead = query.fromNowNs > 0 ? Double(query.fromNowNs) / 1e9 : 1
        let bracket = (pictures - 1) * Double(query.bracketIntervalMs == 0 ? 300 : query.bracketIntervalMs) / 1000
        return try call(.takeStill(query), timeout: lead + bracket + 40 + 20 * pictures).reply
    }

    /// The still once no camera is capturing or being copied any more, looked at every quarter
    /// second, at most `polls` times (then as it is).
    public func waitForStill(_ id: String, polls: Int, progress: (Capfleet_V1_StillInfo) -> Void = { _ in }) throws -> Capfleet_V1_StillInfo {
        var looks = 0
        while true {
            guard let info = try call(.getStill(.with { $0.stillID = id })).reply.stills.first else { throw StillTransferError.noStill(id) }
            progress(info)
            if info.state != "capturing" && info.state != "collecting" || looks >= polls { return info }
            looks += 1
            usleep(250_000)
        }
    }

    /// Copies the still's stored pictures and their sidecars into `directory` (DEVICE-N.png and
    /// DEVICE-N.json), each picture checked against its SHA-256 as soon as it is complete.
    /// Waits up to `polls` quarter seconds for pictures still being copied from the agents.
    public func exportStill(_ id: String, to directory: String, polls: Int = 240, chunkBytes: UInt32 = 1 << 20) throws -> ExportedStill {
        let info = try waitForStill(id, polls: polls)
        let unstored = info.devices.filter { $0.state == "collecting" || $0.state == "capturing" }.map(\.deviceID)
        if !unstored.isEmpty { throw StillTransferError.notStored(still: id, cameras: unstored, seconds: polls / 4) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var files: [String] = []
        var bytes: UInt64 = 0
        for device in info.devices {
            for image in device.images where image.stored {
                let path = directory + "/" + image.fileName
                for sidecar in [false, true] {
                    let target = sidecar ? (path as NSString).deletingPathExtension + ".json" : path
                    bytes += try ChunkedDownload.write(
                        to: target, cannotCreateHint: "check that \(directory) is writable",
                        fetch: { offset in
                            let reply = try call(
                                .readStillFile(
                                    .with {
                                        $0.stillID = id
                                        $0.deviceID = device.deviceID
                                        $0.number = image.number
                                        $0.sidecar = sidecar
                                        $0.offset = offset
                                        $0.length = chunkBytes
                                    })
                            ).reply
                            return ChunkedDownload.Chunk(bytes: reply.segmentData, total: reply.segmentSize)
                        }, advanced: { _ in })
                    files.append(target)
                }
                let digest = try SegmentDigest.sha256(ofFile: path)
                guard digest == image.sha256 else { throw StillTransferError.damaged(path: path, sha256: digest, expected: image.sha256) }
            }
        }
        let missing = info.devices.filter { $0.state == "failed" }.map { "\($0.deviceID): \($0.error)" }
        return ExportedStill(still: info, files: files, bytes: bytes, missing: missing)
    }
}
