/// When moment rules fire (recordings.md, "Moments by rule"). Observations in (detection
/// reports, sensor samples, in their fleet time), actions out: take a moment at the
/// observation's instant, or count a trigger missed because the rule's last moment is still
/// being taken. Pure: the coordinator's `MomentTriggers` performs the actions and reports back
/// when each moment has ended.
///
/// A rule fires when what it waits for arrives: a key (a code's value, a face, a channel over
/// its level) seen that was not present, and had been gone for at least the rule's re-arm
/// time. So a code held in front of a camera for a minute is one moment, a code the decoder
/// misses for a frame is still one, and the same code shown again after a pause is another.
/// A key stops being present when an observation of its source no longer has it (detection
/// reports come for every examined frame with objects, and once when they are all gone). A
/// source silent for `silenceNs` while a key was present (detection turned off, an agent
/// restarted) counts as having lost it.
public struct MomentTriggerBook: Sendable {
    public enum Action: Sendable, Equatable {
        /// Take a moment of `rule` at `instantFleetNs`; `cause` says what was seen.
        case takeMoment(rule: MomentRule, instantFleetNs: UInt64, cause: String)
        /// The rule fired while its last moment was still being taken: counted, not taken.
        case missed(rule: String, instantFleetNs: UInt64, cause: String)
    }

    private struct Presence: Sendable {
        var present: Bool
        var lastSeen: UInt64
    }

    public static let silenceNs: UInt64 = 10_000_000_000
    /// Keys remembered per rule at most (a line of distinct codes must not grow the book):
    /// the longest gone are forgotten first.
    public static let keysPerRule = 256

    private var rules: [String: MomentRule] = [:]
    private var rulesBySource: [String: [String]] = [:]
    private var presence: [String: [String: Presence]] = [:]
    private var taking: Set<String> = []

    public init() {}

    public var ruleNames: [String] { rules.keys.sorted() }

    /// The rules in force now. A rule kept unchanged keeps what it saw; a changed or new one
    /// starts with nothing present (so a code already in view fires it).
    public mutating func replaceRules(with newRules: [MomentRule]) {
        var kept: [String: [String: Presence]] = [:]
        for rule in newRules where rules[rule.name] == rule { kept[rule.name] = presence[rule.name] }
        rules = Dictionary(newRules.map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
        rulesBySource = Dictionary(grouping: rules.values, by: \.sourceDeviceID).mapValues { $0.map(\.name).sorted() }
        presence = kept
        taking = taking.filter { rules[$0] != nil }
    }

    /// Whether anything watches this device: a report of a device without rules costs one lookup.
    public func watches(_ deviceID: String) -> Bool { rulesBySource[deviceID] != nil }

    public mutating func observed(_ observation: MomentObservation) -> [Action] {
        guard let names = rulesBySource[observation.deviceID] else { return [] }
        var actions: [Action] = []
        let now = observation.fleetTimeNs
        for name in names {
            guard let rule = rules[name], let keys = rule.condition.presentKeys(in: observation) else { continue }
            var seen = presence[name] ?? [:]
            var arrivals: [String] = []
            let rearm = UInt64(rule.rearmMs) * 1_000_000
            for key in keys.sorted() {
                if let before = seen[key] {
                    let gap = now > before.lastSeen ? now - before.lastSeen : 0
                    if before.present ? gap >= Self.silenceNs : gap >= rearm { arrivals.append(key) }
                } else {
                    arrivals.append(key)
                }
                seen[key] = Presence(present: true, lastSeen: now)
            }
            for (key, was) in seen where was.present && !keys.contains(key) { seen[key]?.present = false }
            if seen.count > Self.keysPerRule {
                let oldest = seen.filter { !$0.value.present }.sorted { $0.value.lastSeen < $1.value.lastSeen }
                for (key, _) in oldest.prefix(seen.count - Self.keysPerRule) { seen[key] = nil }
            }
            presence[name] = seen
            // One moment per observation: its cameras are the same whatever arrived.
            guard let first = arrivals.first else { continue }
            let cause = Self.cause(rule, key: first, also: arrivals.count - 1)
            if taking.contains(name) {
                actions.append(.missed(rule: name, instantFleetNs: now, cause: cause))
            } else {
                taking.insert(name)
                actions.append(.takeMoment(rule: rule, instantFleetNs: now, cause: cause))
            }
        }
        return actions
    }

    /// The rule's moment was taken, or refused: it may fire again.
    public mutating func momentEnded(rule: String) { taking.remove(rule) }

    public func isTaking(_ rule: String) -> Bool { taking.contains(rule) }

    /// What was seen, for the moment's name and the audit: `qr "part-17" on cam-1`.
    static func cause(_ rule: MomentRule, key: String, also others: Int) -> String {
        let what: String
        switch rule.condition {
        case .code:
            let parts = key.split(separator: ":", maxSplits: 1).map(String.init)
            what = parts.count == 2 ? "\(parts[0]) \"\(parts[1])\"" : key
        case .face: what = "a face"
        case .above, .below, .text: what = rule.condition.spoken
        }
        return what + (others > 0 ? " (and \(others) more)" : "") + " on \(rule.sourceDeviceID)"
    }
}
