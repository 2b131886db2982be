import FleetCore
import Foundation
import GRDB

/// A moment rule (recordings.md, "Moments by rule") as kept: the rule, who made it, and what it
/// has done since.
public struct MomentRuleRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "momentRule"
    public var name: String
    public var sourceDeviceId: String
    /// code, face, above, below, text.
    public var onWhat: String
    public var symbology: String
    public var value: String
    public var channel: String
    public var level: Double
    public var text: String
    /// The cameras, comma-separated (device ids hold no commas); '' with allCameras or for the source.
    public var deviceIds: String
    public var allCameras: Bool
    public var beforeMs: Int
    public var afterMs: Int
    public var rearmMs: Int
    public var jpeg: Bool
    public var createdAt: UnixMilliseconds
    public var createdBy: String
    public var fired: Int = 0
    public var missed: Int = 0
    public var refused: Int = 0
    public var lastMomentId: String = ""
    public var lastFiredAt: UnixMilliseconds = 0
    public var lastProblem: String = ""

    public init(_ rule: MomentRule, createdAt: UnixMilliseconds, createdBy: String) {
        name = rule.name
        sourceDeviceId = rule.sourceDeviceID
        (onWhat, symbology, value, channel, level, text) = ("", "", "", "", 0, "")
        switch rule.condition {
        case let .code(chosen, wanted):
            onWhat = "code"
            symbology = chosen?.rawValue ?? ""
            value = wanted ?? ""
        case .face: onWhat = "face"
        case let .above(named, at):
            (onWhat, channel, level) = ("above", named, at)
        case let .below(named, at):
            (onWhat, channel, level) = ("below", named, at)
        case let .text(wanted):
            (onWhat, text) = ("text", wanted)
        }
        deviceIds = rule.cameras.joined(separator: ",")
        allCameras = rule.allCameras
        beforeMs = Int(rule.beforeMs)
        afterMs = Int(rule.afterMs)
        rearmMs = Int(rule.rearmMs)
        jpeg = rule.jpeg
        self.createdAt = createdAt
        self.createdBy = createdBy
    }

    /// The rule; nil for a row whose condition this build does not know.
    public var rule: MomentRule? {
        let condition: MomentRule.Condition
        switch onWhat {
        case "code":
            condition = .code(symbology: symbology.isEmpty ? nil : BarcodeSymbology(rawValue: symbology), value: value.isEmpty ? nil : value)
        case "face": condition = .face
        case "above": condition = .above(channel: channel, level: level)
        case "below": condition = .below(channel: channel, level: level)
        case "text": condition = .text(text)
        default: return nil
        }
        return MomentRule(
            name: name, sourceDeviceID: sourceDeviceId, condition: condition,
            cameras: deviceIds.split(separator: ",").map(String.init), allCameras: allCameras,
            beforeMs: UInt32(clamping: beforeMs), afterMs: UInt32(clamping: afterMs), rearmMs: UInt32(clamping: rearmMs), jpeg: jpeg)
    }
}

/// What happened when a rule fired, for its figures.
/// (A moment taken counts with the moment itself: `saveMoment(_:audit:rule:)`.)
public enum MomentRuleOutcome: Sendable, Equatable {
    case missed(String)
    case refused(String)
}

extension FleetDatabase {
    /// Adds the rule, or replaces the one of that name (its figures start over), with its audit entry.
    public func saveMomentRule(_ rule: MomentRuleRecord, audit: AuditEntry) async throws(StoreError) {
        try await write("storing moment rule \(rule.name)") { db in
            try rule.save(db)
            _ = try audit.inserted(db)
        }
    }

    /// Removes the rule, with its audit entry; false when there was none of that name.
    public func removeMomentRule(named name: String, audit: AuditEntry) async throws(StoreError) -> Bool {
        try await write("removing moment rule \(name)") { db in
            guard try MomentRuleRecord.deleteOne(db, key: name) else { return false }
            _ = try audit.inserted(db)
            return true
        }
    }

    /// Every rule, by name.
    public func momentRules() async throws(StoreError) -> [MomentRuleRecord] {
        try await read("listing the moment rules") { db in try MomentRuleRecord.order(Column("name")).fetchAll(db) }
    }

    /// Counts what a rule's firing came to. A rule removed meanwhile is left removed.
    public func recordMomentRuleOutcome(_ name: String, _ outcome: MomentRuleOutcome) async throws(StoreError) {
        try await write("recording what moment rule \(name) did") { db in
            switch outcome {
            case let .missed(reason):
                try db.execute(sql: "UPDATE momentRule SET missed = missed + 1, lastProblem = ? WHERE name = ?", arguments: [reason, name])
            case let .refused(reason):
                try db.execute(sql: "UPDATE momentRule SET refused = refused + 1, lastProblem = ? WHERE name = ?", arguments: [reason, name])
            }
        }
    }
}
