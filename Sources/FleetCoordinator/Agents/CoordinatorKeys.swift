import FleetBus
import Foundation

/// The coordinator's long-term CURVE key pair, made on first start and kept with its data:
/// `keys/coordinator.key_secret` (the pair, mode 0600) and `keys/coordinator.key` (the public
/// half, which agents and operators are given). The secret is never logged.
public enum CoordinatorKeys {
    public static func directory(dataDirectory: String) -> String { dataDirectory + "/keys" }
    public static func secretPath(dataDirectory: String) -> String { directory(dataDirectory: dataDirectory) + "/coordinator.key_secret" }
    public static func publicPath(dataDirectory: String) -> String { directory(dataDirectory: dataDirectory) + "/coordinator.key" }

    public static func loadOrCreate(dataDirectory: String) throws -> CurveKeyPair {
        let secretPath = secretPath(dataDirectory: dataDirectory)
        if !FileManager.default.fileExists(atPath: secretPath) {
            // Two processes may start on a fresh data directory at once (a coordinator and
            // `capfleet enroll --data`): exactly one key pair wins, and both use it.
            let keys = try CurveKeyPair.generate()
            if try CurveCertificate(keys: keys, metadata: [("role", "coordinator")]).create(
                path: secretPath, title: "CaptureFleet coordinator key pair")
            {
                try CurveCertificate(publicKey: keys.publicKey, metadata: [("role", "coordinator")])
                    .save(path: publicPath(dataDirectory: dataDirectory), title: "CaptureFleet coordinator public key")
                return keys
            }
        }
        let certificate = try CurveCertificate.load(path: secretPath)
        guard let keys = certificate.keys else {
            throw CurveCertificateError.malformed(path: secretPath, line: 0, reason: "no secret-key: the coordinator needs its whole key pair")
        }
        return keys
    }
}
