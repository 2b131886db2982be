import FleetProtocol
import Foundation

/// One connection to the coordinator's operator endpoint kept for a whole operation of many
/// requests: the credential is read, the ZeroMQ context made and the CURVE handshake done once,
/// not once per request. A backup or an export of a long take is thousands of 1 MiB chunks.
///
/// Like the `OperatorClient` it holds, a session is used from one thread.
public final class OperatorSession {
    public let client: OperatorClient

    public var address: CoordinatorAddress { client.address }

    public init(client: OperatorClient) {
        self.client = client
    }

    public convenience init(address: CoordinatorAddress, credential: OperatorCredential, timeout: Double = 3) throws(OperatorClientError) {
        self.init(client: try OperatorClient(address: address, credential: credential, timeout: timeout))
    }

    /// One request on the session's connection. `timeout` replaces the session's for a request
    /// that takes longer on purpose.
    @discardableResult
    public func call(
        _ body: Capfleet_V1_OperatorRequest.OneOf_Body,
        timeout: Double? = nil
    ) throws(OperatorClientError) -> (reply: Capfleet_V1_OperatorReply, payload: [UInt8]?) {
        try client.call(body, timeout: timeout)
    }

    /// One request per body, a few in flight at once, and the replies in order (`OperatorClient.callEach`).
    public func callEach(_ bodies: [Capfleet_V1_OperatorRequest.OneOf_Body]) throws(OperatorClientError) -> [Capfleet_V1_OperatorReply] {
        try client.callEach(bodies)
    }
}

/// How far a download has come, for a progress display.
public enum TransferProgress: Sendable, Equatable {
    /// The whole download's size is known.
    case started(total: UInt64)
    /// Bytes of it on disk so far.
    case advanced(done: UInt64)
    /// Every byte is there (its checksum is checked after).
    case finished
}

/// Why a download did not end with a file whose checksum matches, and what to do about it.
public enum TransferError: Error, CustomStringConvertible, Sendable {
    case cannotCreate(path: String, hint: String)
    case cannotPlace(path: String, destination: String, errno: Int32)
    case noTake(String)
    case nothingToExport(take: String)
    case backupDamaged(received: UInt64, size: UInt64, sha256: String, expected: String)
    case segmentDamaged(path: String, sha256: String, expected: String, take: String)
    /// Finished segments whose SHA-256 the coordinator has not put in the index yet.
    case checksumsPending(take: String, segments: [String], seconds: Int)
    /// Collecting a take's agent-held segments stopped on an error.
    case collectFailed(take: String, reason: String)
    /// Offloading a take to a storage destination ended with segments not proved there.
    case offloadFailed(take: String, destination: String, reason: String, full: Bool)

    public var description: String {
        switch self {
        case let .offloadFailed(take, destination, reason, full):
            "take \(take) is not all on \(destination): \(reason). "
                + (full
                    ? "The destination is full: make room on it, then run capfleet recordings offload \(take) --to \(destination) again; nothing was deleted here"
                    : "Segments proved there stay proved; run capfleet recordings offload \(take) --to \(destination) again to go on")
        case let .collectFailed(take, reason):
            "take \(take) was not collected whole: \(reason). Segments copied so far stay collected; run capfleet recordings collect \(take) again to go on"
        case let .cannotCreate(path, hint):
            "cannot create \(path): \(hint)"
        case let .cannotPlace(path, destination, code):
            "cannot move \(path) to \(destination): \(String(cString: strerror(code)))"
        case let .noTake(take):
            "the coordinator did not describe take \(take)"
        case let .nothingToExport(take):
            "take \(take) has no finished segments to export yet"
        case let .backupDamaged(received, size, sha256, expected):
            "the backup arrived damaged (\(received) of \(size) bytes, SHA-256 \(sha256) instead of \(expected)); run capfleet backup again"
        case let .segmentDamaged(path, sha256, expected, take):
            "\(path): SHA-256 \(sha256) differs from the index's \(expected); export again, or run capfleet recordings verify \(take)"
        case let .checksumsPending(take, segments, seconds):
            "take \(take): the coordinator is still checksumming \(segments.joined(separator: ", ")) after \(seconds) s of waiting; export again in a while, or run capfleet recordings verify \(take) to see why"
        }
    }
}
