import FleetBus
import FleetCore
import FleetStore
import Foundation

/// What an admin can do on the coordinator's own host, with the data directory's files
/// rather than a key: make the first admin, mint enrollment tokens for a scripted install.
/// Whoever can write the data directory owns the fleet anyway; a running coordinator sees
/// the changes at the next handshake (its ZAP handler reads the database).
public enum LocalAdministration {
    /// Adds (or changes) an operator. Without `publicKey` a key pair is made and returned,
    /// for the caller to write into a credential file.
    public static func addOperator(dataDirectory: String, name: String, role: OperatorRole, publicKey: CurvePublicKey?,
                                   by actor: String) async throws -> (keys: CurveKeyPair?, coordinatorKey: CurvePublicKey) {
        guard AccessNames.isValid(name) else { throw LocalAdministrationError(AccessNames.rule) }
        let (store, coordinatorKeys) = try open(dataDirectory)
        let keys = publicKey == nil ? try CurveKeyPair.generate() : nil
        let key = publicKey ?? keys!.publicKey
        let now = Date().unixMilliseconds
        try await store.saveOperator(OperatorRecord(name: name, publicKey: key.z85, role: role.rawValue, addedAt: now, addedBy: actor),
                                     audit: AuditEntry(at: now, actor: actor, action: "operator.add", target: name, outcome: "ok",
                                                       detail: "\(role.rawValue), key \(key.fingerprint)…, on the coordinator's host"))
        return (keys, coordinatorKeys.publicKey)
    }

    /// A one-time enrollment token for an agent to be called `name`.
    public static func createEnrollmentToken(dataDirectory: String, name: String, validSeconds: UInt32,
                                             by actor: String) async throws -> (token: EnrollmentToken, expiresAt: Int64) {
        guard AccessNames.isValid(name) else { throw LocalAdministrationError(AccessNames.rule) }
        let (store, coordinatorKeys) = try open(dataDirectory)
        return try await issueEnrollmentToken(store: store, coordinatorKey: coordinatorKeys.publicKey, name: name,
                                              validSeconds: validSeconds, by: actor, where: ", on the coordinator's host")
    }

    /// Makes a token's key pair and records its public half; the token itself is returned
    /// once and kept nowhere.
    static func issueEnrollmentToken(store: FleetDatabase, coordinatorKey: CurvePublicKey, name: String, validSeconds: UInt32,
                                     by actor: String, where place: String = "") async throws -> (token: EnrollmentToken, expiresAt: Int64) {
        let keys = try CurveKeyPair.generate()
        let now = Date().unixMilliseconds
        let expires = now + Int64(validSeconds) * 1000
        try await store.createEnrollmentToken(
            EnrollmentTokenRecord(publicKey: keys.publicKey.z85, name: name, createdBy: actor, createdAt: now, expiresAt: expires),
            audit: AuditEntry(at: now, actor: actor, action: "enroll.token", target: name, outcome: "ok",
                              detail: "token \(keys.publicKey.fingerprint)… valid for \(validSeconds) s\(place)"))
        return (EnrollmentToken(keys: keys, coordinatorKey: coordinatorKey), expires)
    }

    private static func open(_ dataDirectory: String) throws -> (FleetDatabase, CurveKeyPair) {
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        let keys = try CoordinatorKeys.loadOrCreate(dataDirectory: dataDirectory)
        let store = try FleetDatabase(path: dataDirectory + "/fleet.sqlite")
        return (store, keys)
    }
}

public struct LocalAdministrationError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
