import FleetProtocol
import Foundation

/// How the CLI shows moments (recordings.md, "Moments").
public enum MomentViews {
    /// `moment-… (name): 3 cameras at fleet time T, 1.5 s before to 1.5 s after; take …, still …`
    public static func summary(_ moment: Capfleet_V1_MomentInfo) -> String {
        let named = moment.name == moment.id ? "" : " (\(moment.name))"
        let by = moment.trigger.hasPrefix("rule ") ? "; by \(moment.trigger), on \(moment.cause)" : ""
        return
            "\(moment.id)\(named): \(moment.deviceIds.joined(separator: ", ")) at fleet time \(moment.instantFleetNs), \(seconds(moment.beforeMs)) before to \(seconds(moment.afterMs)) after; take \(moment.takeID), still \(moment.stillID)\(by)"
    }

    private static func seconds(_ milliseconds: UInt32) -> String {
        milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(Double(milliseconds) / 1000) s"
    }

    /// `capfleet moment --json`, `capfleet moments --json`: one moment, with its take and still
    /// when just taken.
    public struct Moment: Encodable {
        var id, name: String
        var instantFleetNs: UInt64
        var beforeMs, afterMs: UInt32
        var takeId, stillId: String
        var devices: [String]
        var createdUnixMs: Int64
        var createdBy, trigger, cause: String
        var take: RecordingViews.Take?
        var still: StillViews.Still?

        public init(_ moment: Capfleet_V1_MomentInfo, take: Capfleet_V1_TakeInfo?, still: Capfleet_V1_StillInfo?) {
            id = moment.id; name = moment.name; instantFleetNs = moment.instantFleetNs
            beforeMs = moment.beforeMs; afterMs = moment.afterMs
            takeId = moment.takeID; stillId = moment.stillID; devices = moment.deviceIds
            createdUnixMs = moment.createdUnixMs; createdBy = moment.createdBy; trigger = moment.trigger; cause = moment.cause
            self.take = take.map { RecordingViews.Take($0) }
            self.still = still.map { StillViews.Still($0) }
        }

        enum CodingKeys: String, CodingKey {
            case id, name, instantFleetNs = "instant_fleet_ns", beforeMs = "before_ms", afterMs = "after_ms", takeId = "take_id",
                stillId = "still_id", devices, createdUnixMs = "created_unix_ms", createdBy = "created_by", trigger, cause, take, still
        }
    }

    /// `line-a: on qr "part-17" from cam-1 → cam-1, 1.5 s before to 1.5 s after, re-armed after 1 s; 3 taken, 1 missed`
    public static func rule(_ info: Capfleet_V1_MomentRuleInfo) -> String {
        let rule = info.rule
        let cameras = rule.all ? "every camera" : rule.deviceIds.isEmpty ? rule.sourceDeviceID : rule.deviceIds.joined(separator: ", ")
        var text =
            "\(rule.name): on \(condition(rule)) from \(rule.sourceDeviceID) → \(cameras), \(seconds(rule.beforeMs)) before to \(seconds(rule.afterMs)) after, re-armed after \(seconds(rule.rearmMs)); \(info.fired) taken"
        if info.missed > 0 { text += ", \(info.missed) missed" }
        if info.refused > 0 { text += ", \(info.refused) refused" }
        if info.taking { text += "; taking one now" }
        if !info.lastMomentID.isEmpty { text += "\n  last: \(info.lastMomentID)" }
        if !info.lastProblem.isEmpty { text += "\n  last problem: \(info.lastProblem)" }
        return text
    }

    /// What a rule waits for, as the CLI writes it.
    public static func condition(_ rule: Capfleet_V1_MomentRule) -> String {
        switch rule.on {
        case .code:
            return "code" + (rule.symbology.isEmpty ? "" : " \(rule.symbology)") + (rule.value.isEmpty ? "" : " \"\(rule.value)\"")
        case .face: return "face"
        case .above: return "\(rule.channel) above \(rule.level)"
        case .below: return "\(rule.channel) below \(rule.level)"
        case .text: return "text \"\(rule.text)\""
        default: return "nothing this CLI knows"
        }
    }

    /// `capfleet moment-rule … --json`.
    public struct Rule: Encodable {
        var name, source, on: String
        var symbology, value, channel, text: String?
        var level: Double?
        var cameras: [String]
        var all: Bool
        var beforeMs, afterMs, rearmMs: UInt32
        var encoding: String
        var createdBy: String
        var createdUnixMs: Int64
        var fired, missed, refused: UInt64
        var lastMomentId, lastProblem: String
        var lastFiredUnixMs: Int64
        var taking: Bool

        public init(_ info: Capfleet_V1_MomentRuleInfo) {
            let rule = info.rule
            name = rule.name; source = rule.sourceDeviceID
            switch rule.on {
            case .code: on = "code"
            case .face: on = "face"
            case .above: on = "above"
            case .below: on = "below"
            case .text: on = "text"
            default: on = "unknown"
            }
            symbology = rule.symbology.isEmpty ? nil : rule.symbology
            value = rule.value.isEmpty ? nil : rule.value
            channel = rule.channel.isEmpty ? nil : rule.channel
            level = rule.on == .above || rule.on == .below ? rule.level : nil
            text = rule.text.isEmpty ? nil : rule.text
            cameras = rule.deviceIds; all = rule.all
            beforeMs = rule.beforeMs; afterMs = rule.afterMs; rearmMs = rule.rearmMs
            encoding = rule.encoding == .jpeg ? "jpeg" : "png"
            createdBy = info.createdBy; createdUnixMs = info.createdUnixMs
            fired = info.fired; missed = info.missed; refused = info.refused
            lastMomentId = info.lastMomentID; lastProblem = info.lastProblem; lastFiredUnixMs = info.lastFiredUnixMs
            taking = info.taking
        }

        enum CodingKeys: String, CodingKey {
            case name, source, on, symbology, value, channel, text, level, cameras, all, beforeMs = "before_ms", afterMs = "after_ms",
                rearmMs = "rearm_ms", encoding, createdBy = "created_by", createdUnixMs = "created_unix_ms", fired, missed, refused,
                lastMomentId = "last_moment_id", lastProblem = "last_problem", lastFiredUnixMs = "last_fired_unix_ms", taking
        }
    }

    /// A duration as the CLI takes it (1.5s, 500ms, 2), from 1 ms to `maximumMs`; nil otherwise.
    public static func milliseconds(_ text: String, maximumMs: UInt32) -> UInt32? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let (number, scale): (Substring, Double) =
            trimmed.hasSuffix("ms") ? (trimmed.dropLast(2), 1) : trimmed.hasSuffix("s") ? (trimmed.dropLast(), 1000) : (Substring(trimmed), 1000)
        guard let value = Double(number), value.isFinite else { return nil }
        let milliseconds = (value * scale).rounded()
        guard milliseconds >= 1, milliseconds <= Double(maximumMs) else { return nil }
        return UInt32(milliseconds)
    }
}
