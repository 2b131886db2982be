import FleetCore
import Foundation
import GRDB

/// A device's consent now.
public struct ConsentRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "consent"
    public var deviceId: String
    public var state: String
    public var reason: String
    public var changedAt: UnixMilliseconds
    public var changedBy: String

    public var consentState: ConsentState { ConsentState(rawValue: state) ?? .notDetermined }
}

/// One change of a device's consent.
public struct ConsentChange: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "consentHistory"
    public var id: Int64?
    public var deviceId: String
    public var at: UnixMilliseconds
    public var actor: String
    public var action: String
    public var fromState: String
    public var toState: String
    public var reason: String
}

extension FleetDatabase {
    /// Applies `action` under `ConsentRules` in one transaction: the new state, its history
    /// row and its audit entry, or nothing and the refusal.
    public func changeConsent(
        deviceID: String, action: ConsentAction, role: OperatorRole, actor: String, reason: String,
        at now: UnixMilliseconds
    ) async throws(StoreError) -> Result<ConsentChange, ConsentRefusal> {
        try await write("changing the consent of \(deviceID)") { db in
            guard try DeviceRecord.fetchOne(db, key: deviceID) != nil else { throw StoreError.notFound(what: "device \(deviceID)") }
            let current = try ConsentRecord.fetchOne(db, key: deviceID)?.consentState ?? .notDetermined
            switch ConsentRules.apply(action, to: current, by: role, reason: reason) {
            case let .failure(refusal):
                _ = try AuditEntry(
                    at: now, actor: actor, action: "consent.\(action.rawValue)", target: deviceID, outcome: "refused",
                    detail: refusal.description
                ).inserted(db)
                return .failure(refusal)
            case let .success(next):
                try ConsentRecord(deviceId: deviceID, state: next.rawValue, reason: reason, changedAt: now, changedBy: actor).save(db)
                let change = try ConsentChange(
                    deviceId: deviceID, at: now, actor: actor, action: action.rawValue,
                    fromState: current.rawValue, toState: next.rawValue, reason: reason
                ).inserted(db)
                _ = try AuditEntry(
                    at: now, actor: actor, action: "consent.\(action.rawValue)", target: deviceID, outcome: "ok",
                    detail: "\(current.rawValue) → \(next.rawValue): \(reason)"
                ).inserted(db)
                return .success(change)
            }
        }
    }

    /// The device's consent; a device nobody decided about is not determined.
    public func consent(deviceID: String) async throws(StoreError) -> ConsentRecord? {
        try await read("reading the consent of \(deviceID)") { db in try ConsentRecord.fetchOne(db, key: deviceID) }
    }

    public func consents() async throws(StoreError) -> [String: ConsentRecord] {
        try await read("reading consent") { db in
            Dictionary(uniqueKeysWithValues: try ConsentRecord.fetchAll(db).map { ($0.deviceId, $0) })
        }
    }

    /// Every change of the device's consent, oldest first.
    public func consentHistory(deviceID: String) async throws(StoreError) -> [ConsentChange] {
        try await read("reading the consent history of \(deviceID)") { db in
            try ConsentChange.filter(Column("deviceId") == deviceID).order(Column("id")).fetchAll(db)
        }
    }
}
