import FleetBus
import FleetProtocol
import FleetSystem
import Foundation
import Logging

/// What an enrolled agent keeps in its state directory (`keys/agent.key_secret`, mode
/// 0600): its own CURVE key pair, the coordinator's public key it enrolled with, and the
/// name the admin gave it. Without this file the agent cannot connect.
public struct AgentCredentials: Sendable {
    public let keys: CurveKeyPair
    public let coordinatorKey: CurvePublicKey
    public let nodeName: String
    /// The token it was enrolled with (its public key), so that the same `--enroll` flag on
    /// a restart is recognised as spent rather than tried again.
    public let enrolledWith: String

    public static func path(stateDirectory: String) -> String { stateDirectory + "/keys/agent.key_secret" }

    public static func load(stateDirectory: String) throws -> AgentCredentials? {
        let path = path(stateDirectory: stateDirectory)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let certificate = try CurveCertificate.load(path: path)
        guard let keys = certificate.keys, let coordinatorText = certificate["coordinator-key"],
            let coordinatorKey = CurvePublicKey(z85: coordinatorText)
        else {
            throw CurveCertificateError.malformed(path: path, line: 0, reason: "an agent key file needs secret-key and coordinator-key")
        }
        return AgentCredentials(
            keys: keys, coordinatorKey: coordinatorKey, nodeName: certificate["name"] ?? "",
            enrolledWith: certificate["enrolled-with"] ?? "")
    }

    func save(stateDirectory: String, nodeID: String) throws {
        let certificate = CurveCertificate(
            keys: keys,
            metadata: [
                ("node-id", nodeID), ("name", nodeName), ("coordinator-key", coordinatorKey.z85), ("enrolled-with", enrolledWith),
            ])
        try certificate.save(path: Self.path(stateDirectory: stateDirectory), title: "CaptureFleet agent key pair")
    }
}

/// Presents an enrollment token to the coordinator until it answers: connects with the token's
/// one-time key pair (so the coordinator knows the token is genuine before anything is
/// said), sends a fresh public key of the agent's own, and keeps it if accepted.
enum Enrollment {
    /// `requestedName`: what the node asks to be called (`capfleet agent --name`), empty for
    /// none; a token made with a name prefix gives it, a token for one name gives its own.
    static func enroll(
        token: EnrollmentToken, endpoint: String, nodeID: String, requestedName: String, hostname: String,
        softwareVersion: String, stateDirectory: String, timeout: Double = 10, logger: Logger
    ) async throws -> AgentCredentials {
        // An enrollment nobody answered (the coordinator not up yet, or busy with a hundred
        // agents joining at once) is asked again with the same key, which the coordinator
        // answers as before: only a refusal ends it. The wait between asks grows to 30 s.
        var unanswered = 0
        while true {
            let nextDelay = Self.retryDelay(after: unanswered + 1)
            // Blocking ZeroMQ calls run on a thread of their own, not the async pool.
            let outcome = try await OwnedThread.run("cf-enroll") { () throws -> AgentCredentials? in
                // Kept until the answer comes, so that an agent that dies before it hears it
                // presents the same key again and is answered as before, spending no other use.
                let ownKeys = try PendingEnrollmentKey.loadOrMake(stateDirectory: stateDirectory, nodeID: nodeID, token: token)
                let credentials: AgentCredentials
                do {
                    credentials = try run(
                        token: token, ownKeys: ownKeys, endpoint: endpoint, nodeID: nodeID, requestedName: requestedName,
                        hostname: hostname, softwareVersion: softwareVersion, timeout: timeout)
                } catch Attempt.refused(let reason) {
                    // This key was not recorded, and is no use for another try.
                    PendingEnrollmentKey.remove(stateDirectory: stateDirectory)
                    throw AgentError.enrollmentRefused(reason)
                } catch Attempt.unanswered(let reason) {
                    logger.warning(
                        "enrollment not answered yet; asking again with the same key",
                        metadata: ["reason": "\(reason)", "retry_in_s": "\(nextDelay)"])
                    return nil
                }
                try credentials.save(stateDirectory: stateDirectory, nodeID: nodeID)
                PendingEnrollmentKey.remove(stateDirectory: stateDirectory)
                return credentials
            }
            if let outcome { return outcome }
            unanswered += 1
            try await Task.sleep(for: .seconds(Self.retryDelay(after: unanswered)))
        }
    }

    /// Seconds before asking again after `unanswered` asks in a row went unanswered: 1, 2, 4,
    /// … up to 30.
    static func retryDelay(after unanswered: Int) -> Int { min(30, 1 << min(max(unanswered - 1, 0), 5)) }

    /// How an attempt ended without enrolling: refused by the coordinator (or its ZAP
    /// handler), or without its answer.
    private enum Attempt: Error {
        case refused(String)
        case unanswered(String)
    }

    private static func run(
        token: EnrollmentToken, ownKeys: CurveKeyPair, endpoint: String, nodeID: String, requestedName: String,
        hostname: String, softwareVersion: String, timeout: Double
    ) throws -> AgentCredentials {
        let context = ZMQContext()
        let socket = try ZMQSocket(context: context, type: .dealer)
        try socket.makeCurveClient(serverKey: token.coordinatorKey, keys: token.keys)
        let monitor = try socket.openMonitor(context: context, events: SocketEvent.handshakeEvents)
        defer {
            monitor.close()
            socket.close()
        }
        try socket.connect(endpoint)
        let request = Capfleet_V1_AgentMessage.with {
            $0.enroll = .with {
                $0.nodePublicKey = Data(ownKeys.publicKey.bytes)
                $0.nodeID = nodeID
                $0.hostname = hostname
                $0.softwareVersion = softwareVersion
                $0.requestedName = requestedName
            }
        }
        try socket.send(try request.serializedBytes() as [UInt8])
        let deadline = ContinuousClock.now + .seconds(timeout)
        var handshakes = 0
        while ContinuousClock.now < deadline {
            for event in SocketEvent.drain(monitor) {
                if event.event == SocketEvent.authFailure { throw Attempt.refused(Self.unknownToken) }
                if event.event == SocketEvent.succeeded { handshakes += 1 }
            }
            guard socket.waitForInput(milliseconds: 100),
                let received = try socket.receiveMultipart(dontWait: true, maxParts: 2), received.parts.count == 1,
                let message = try? Capfleet_V1_CoordinatorMessage(serializedBytes: received.parts[0].array)
            else { continue }
            switch message.body {
            case let .enrolled(answer)?:
                guard answer.status.isOK else { throw Attempt.refused(answer.status.reason) }
                return AgentCredentials(
                    keys: ownKeys, coordinatorKey: token.coordinatorKey, nodeName: answer.nodeName,
                    enrolledWith: token.keys.publicKey.z85)
            case let .error(status)?:
                throw Attempt.refused(status.reason)
            default:
                continue
            }
        }
        throw Attempt.unanswered(
            handshakes == 0
                ? "no secure connection to the coordinator at \(endpoint) within \(Int(timeout)) s: is it running there, and is the token from this coordinator (its key is in the token)?"
                : "the coordinator at \(endpoint) did not answer the enrollment within \(Int(timeout)) s")
    }

    static let unknownToken =
        "the coordinator does not know this token (mistyped, forged, or made by another coordinator); ask an admin for a new one with `capfleet enroll --name NAME`"
}

/// The key pair an agent enrolls with, kept (`keys/agent.key_pending`, mode 0600) from before
/// it sends `Enroll` until the answer comes: an agent killed in between tries again with the
/// same key, which the coordinator recognises (enrollment.md, "Multi-use tokens"). It is
/// used for nothing else; once enrolled, the key lives on in `agent.key_secret`.
enum PendingEnrollmentKey {
    static func path(stateDirectory: String) -> String { stateDirectory + "/keys/agent.key_pending" }

    /// The pending key for this node and token, or a new one, written before it is used.
    static func loadOrMake(stateDirectory: String, nodeID: String, token: EnrollmentToken) throws -> CurveKeyPair {
        let path = path(stateDirectory: stateDirectory)
        let tokenKey = token.keys.publicKey.z85
        if FileManager.default.fileExists(atPath: path) {
            let pending = try CurveCertificate.load(path: path)
            if let keys = pending.keys, pending["node-id"] == nodeID, pending["enrolling-with"] == tokenKey { return keys }
        }
        let keys = try CurveKeyPair.generate()
        try CurveCertificate(keys: keys, metadata: [("node-id", nodeID), ("enrolling-with", tokenKey)])
            .save(path: path, title: "CaptureFleet agent key pair, enrollment under way")
        return keys
    }

    static func remove(stateDirectory: String) {
        // A leftover is harmless: it is only used again with the same token and node id.
        try? FileManager.default.removeItem(atPath: path(stateDirectory: stateDirectory))
    }
}
