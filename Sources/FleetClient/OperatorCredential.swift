import FleetBus
import Foundation

/// An operator's key file: their CURVE key pair, their name and role as the admin gave
/// them, the coordinator's public key and, optionally, its address. ZeroMQ certificate
/// format, so pyzmq's `zmq.auth.load_certificate` reads the keys too. Mode 0600.
public struct OperatorCredential: Sendable {
    public static let environmentVariable = "CAPFLEET_CREDENTIAL"

    public let name: String
    public let role: String
    public let keys: CurveKeyPair
    public let coordinatorKey: CurvePublicKey
    /// The coordinator's operator endpoint HOST:PORT, if the file names one.
    public let coordinator: String?
    /// Its telemetry endpoint HOST:PORT, if the file names one: what a subscriber connects to.
    public let telemetry: String?
    /// Written by `capfleet dev` for its own throwaway fleet: replaceable by the next one.
    public let writtenByDev: Bool

    public init(
        name: String, role: String, keys: CurveKeyPair, coordinatorKey: CurvePublicKey, coordinator: String?,
        telemetry: String? = nil, writtenByDev: Bool = false
    ) {
        self.name = name
        self.role = role
        self.keys = keys
        self.coordinatorKey = coordinatorKey
        self.coordinator = coordinator
        self.telemetry = telemetry
        self.writtenByDev = writtenByDev
    }

    /// `$XDG_CONFIG_HOME/capfleet/credential`, else `~/.config/capfleet/credential`.
    public static var defaultPath: String {
        let env = ProcessInfo.processInfo.environment
        let base = env["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? ((env["HOME"] ?? "/root") + "/.config")
        return base + "/capfleet/credential"
    }

    /// The file a command uses: the flag, else the environment, else the default path.
    public static func path(flag: String?) -> String {
        if let flag { return flag }
        if let env = ProcessInfo.processInfo.environment[environmentVariable], !env.isEmpty { return env }
        return defaultPath
    }

    public static func load(path: String) throws(OperatorCredentialError) -> OperatorCredential {
        guard FileManager.default.fileExists(atPath: path) else { throw .missing(path: path) }
        let certificate: CurveCertificate
        do {
            certificate = try CurveCertificate.load(path: path)
        } catch {
            throw .unusable(path: path, reason: error.description)
        }
        guard let keys = certificate.keys else {
            throw .unusable(path: path, reason: "it has no secret-key: it is someone's public key, not a credential")
        }
        guard let text = certificate["coordinator-key"], let coordinatorKey = CurvePublicKey(z85: text) else {
            throw .unusable(path: path, reason: "it names no coordinator-key (40 Z85 characters)")
        }
        return OperatorCredential(
            name: certificate["name"] ?? "", role: certificate["role"] ?? "", keys: keys,
            coordinatorKey: coordinatorKey, coordinator: certificate["coordinator"], telemetry: certificate["telemetry"],
            writtenByDev: certificate["written-by"] == "capfleet dev")
    }

    public func save(path: String) throws(CurveCertificateError) {
        var metadata: [(name: String, value: String)] = [("name", name), ("role", role), ("coordinator-key", coordinatorKey.z85)]
        if let coordinator { metadata.append(("coordinator", coordinator)) }
        if let telemetry { metadata.append(("telemetry", telemetry)) }
        if writtenByDev { metadata.append(("written-by", "capfleet dev")) }
        try CurveCertificate(keys: keys, metadata: metadata).save(path: path, title: "CaptureFleet operator credential for \(name)")
    }
}

public enum OperatorCredentialError: Error, CustomStringConvertible, Sendable {
    case missing(path: String)
    case unusable(path: String, reason: String)

    public var description: String {
        switch self {
        case let .missing(path):
            "no operator credential at \(path). Ask an admin for one (`capfleet operator add NAME --role viewer|operator|admin --out FILE`), or on the coordinator's host make the first admin with `capfleet operator add NAME --role admin --data DATA_DIR`; then point --credential or \(OperatorCredential.environmentVariable) at the file, or put it at \(OperatorCredential.defaultPath)."
        case let .unusable(path, reason):
            "the operator credential \(path) cannot be used: \(reason)"
        }
    }
}
