import FleetProtocol
import Foundation

/// How `capfleet enroll list` shows enrollment tokens: a table for people, JSON for programs.
public enum EnrollmentViews {
    /// What names a token gives: its one name, or `PREFIXN`.
    public static func names(_ info: Capfleet_V1_EnrollmentTokenInfo) -> String {
        info.namePrefix.isEmpty ? info.name : info.namePrefix + "N"
    }

    public static func state(_ state: Capfleet_V1_EnrollmentTokenState) -> String {
        switch state {
        case .open: "open"
        case .spent: "spent"
        case .expired: "expired"
        case .revoked: "revoked"
        default: "unknown"
        }
    }

    public static func table(_ tokens: [Capfleet_V1_EnrollmentTokenInfo], all: Bool, now: Date = Date()) -> String {
        guard !tokens.isEmpty else {
            return all
                ? "no enrollment tokens yet: make one with capfleet enroll"
                : "no token admits more agents (capfleet enroll list --all shows every token)"
        }
        return FleetTables.table(
            ["TOKEN", "NAMES", "USED", "REMAINING", "STATE", "EXPIRES", "CREATED BY", "NODES"],
            tokens.map { info in
                [
                    String(info.tokenKey.prefix(8)) + "…", names(info), "\(info.used)/\(info.uses)", String(info.remaining), state(info.state),
                    expiry(info.expiresUnixMs, now: now), info.createdBy,
                    info.enrollments.isEmpty ? "-" : info.enrollments.map(\.nodeName).joined(separator: ","),
                ]
            })
    }

    /// "in 42m", "in 3h", "5m ago".
    static func expiry(_ unixMilliseconds: Int64, now: Date) -> String {
        let seconds = Double(unixMilliseconds) / 1000 - now.timeIntervalSince1970
        guard seconds > 0 else { return FleetTables.age(unixMilliseconds, now: now) }
        return seconds < 7200 ? "in \(Int(seconds / 60))m" : "in \(Int(seconds / 3600))h"
    }

    public struct Token: Encodable {
        var tokenKey, name, namePrefix, state, createdBy, revokedBy: String
        var uses, used, remaining: UInt32
        var createdUnixMs, expiresUnixMs, revokedUnixMs: Int64
        var enrollments: [Use]

        public init(_ info: Capfleet_V1_EnrollmentTokenInfo) {
            tokenKey = info.tokenKey
            name = info.name
            namePrefix = info.namePrefix
            state = EnrollmentViews.state(info.state)
            createdBy = info.createdBy
            revokedBy = info.revokedBy
            uses = info.uses
            used = info.used
            remaining = info.remaining
            createdUnixMs = info.createdUnixMs
            expiresUnixMs = info.expiresUnixMs
            revokedUnixMs = info.revokedUnixMs
            enrollments = info.enrollments.map { Use(number: $0.number, nodeId: $0.nodeID, nodeName: $0.nodeName, unixMs: $0.unixMs) }
        }

        enum CodingKeys: String, CodingKey {
            case tokenKey = "token_key", name, namePrefix = "name_prefix", state, createdBy = "created_by",
                revokedBy = "revoked_by", uses, used, remaining, createdUnixMs = "created_unix_ms",
                expiresUnixMs = "expires_unix_ms", revokedUnixMs = "revoked_unix_ms", enrollments
        }
    }

    public struct Use: Encodable {
        var number: UInt32
        var nodeId, nodeName: String
        var unixMs: Int64

        enum CodingKeys: String, CodingKey {
            case number, nodeId = "node_id", nodeName = "node_name", unixMs = "unix_ms"
        }
    }
}
