import Foundation

/// The agent's node id, created once and kept in its state directory so that a restarted
/// agent is the same node to the coordinator.
public struct NodeIdentity: Sendable {
    public let nodeID: String

    public static func loadOrCreate(stateDirectory: String) throws -> NodeIdentity {
        let directory = URL(fileURLWithPath: stateDirectory, isDirectory: true)
        let file = directory.appendingPathComponent("node-id")
        if let existing = try? String(contentsOf: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), !existing.isEmpty {
            return NodeIdentity(nodeID: existing)
        }
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let id = "node-" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)
            // Write to a temporary name and rename, so a crash never leaves a half-written id.
            let temporary = directory.appendingPathComponent("node-id.tmp")
            try (id + "\n").write(to: temporary, atomically: false, encoding: .utf8)
            guard rename(temporary.path, file.path) == 0 else {
                throw AgentError.stateDirectoryUnusable(path: stateDirectory, reason: "rename failed: \(String(cString: strerror(errno)))")
            }
            return NodeIdentity(nodeID: id)
        } catch let error as AgentError {
            throw error
        } catch {
            throw AgentError.stateDirectoryUnusable(path: stateDirectory, reason: String(describing: error))
        }
    }
}

public enum AgentError: Error, CustomStringConvertible {
    case stateDirectoryUnusable(path: String, reason: String)
    case noCameras
    case deviceNotFound(String, available: [String])
    case deviceUnusable(String, String)
    case syntheticFormatUnknown(String, available: [String])
    case notEnrolled(stateDirectory: String)
    case enrollmentRefused(String)
    case revoked(String)
    case sensorStreamUnusable(String)
    case microphoneNotFound(String, found: String, problems: [String])

    public var description: String {
        switch self {
        case let .stateDirectoryUnusable(path, reason):
            "cannot keep the agent's identity in \(path): \(reason). Pass --state-dir with a writable directory."
        case .noCameras:
            "this agent has no device to offer: pass --device PATH for a V4L2 camera, --synthetic N for test-pattern cameras, --microphone NAME or --synthetic-microphones N for microphones, or --sensor-stream NAME"
        case let .deviceNotFound(wanted, available):
            "no video capture device \(wanted) on this host; capture devices here: \(available.isEmpty ? "none" : available.joined(separator: ", "))"
        case let .deviceUnusable(path, reason):
            "cannot use the camera \(path): \(reason)"
        case let .syntheticFormatUnknown(wanted, available):
            "the synthetic camera has no format \(wanted); pass --synthetic-format with one of \(available.joined(separator: ", "))"
        case let .notEnrolled(directory):
            "this agent is not enrolled (no key in \(directory)/keys): on the coordinator run `capfleet enroll --name NAME` and start the agent once with --enroll TOKEN"
        case let .enrollmentRefused(reason):
            "enrollment refused: \(reason)"
        case let .revoked(reason):
            "the coordinator cut this node off: \(reason)"
        case let .sensorStreamUnusable(problem):
            "\(problem) (setting sensor_streams, flag --sensor-stream)"
        case let .microphoneNotFound(wanted, found, problems):
            "no ALSA capture device \(wanted) on this host (name it hw:CARD=ID,DEV=N or by its fleet id); capture devices here: \(found)"
                + (problems.isEmpty ? "" : "; unusable: " + problems.joined(separator: "; "))
        }
    }
}
