import FleetProtocol

/// A device's consent, as camera users know authorization status: frames leave the host
/// only while it is `authorized`.
public enum ConsentState: String, Sendable, CaseIterable, Codable {
    case notDetermined = "not_determined"
    case authorized
    case denied
    /// A site policy forbids the device; only an admin can lift it.
    case restricted

    public var allowsRealFrames: Bool { self == .authorized }

    public init?(wire: Capfleet_V1_ConsentState) {
        switch wire {
        case .notDetermined: self = .notDetermined
        case .authorized: self = .authorized
        case .denied: self = .denied
        case .restricted: self = .restricted
        default: return nil
        }
    }

    public var wire: Capfleet_V1_ConsentState {
        switch self {
        case .notDetermined: .notDetermined
        case .authorized: .authorized
        case .denied: .denied
        case .restricted: .restricted
        }
    }
}

public enum ConsentAction: String, Sendable, CaseIterable {
    case grant, deny, revoke, restrict

    public init?(wire: Capfleet_V1_ConsentAction) {
        switch wire {
        case .grant: self = .grant
        case .deny: self = .deny
        case .revoke: self = .revoke
        case .restrict: self = .restrict
        default: return nil
        }
    }

    public var wire: Capfleet_V1_ConsentAction {
        switch self {
        case .grant: .grant
        case .deny: .deny
        case .revoke: .revoke
        case .restrict: .restrict
        }
    }
}

/// Why a consent change is refused, in words that say what would work.
public struct ConsentRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    /// Set when a stronger role would be allowed to do it.
    public let neededRole: OperatorRole?
}

/// The rules of consent changes: pure, so the coordinator and the tests agree on them.
public enum ConsentRules {
    /// The state `action` leads to from `current` when `role` asks, or why it may not.
    public static func apply(
        _ action: ConsentAction, to current: ConsentState, by role: OperatorRole,
        reason: String
    ) -> Result<ConsentState, ConsentRefusal> {
        guard !reason.allSatisfy(\.isWhitespace) else {
            return .failure(
                ConsentRefusal(description: "say why with --reason: every consent change is kept with who, when and why", neededRole: nil))
        }
        if action == .restrict || current == .restricted, role < .admin {
            let what = action == .restrict ? "restricting a device" : "changing a restricted device's consent"
            return .failure(ConsentRefusal(description: "\(what) needs the admin role: a site policy forbids the device", neededRole: .admin))
        }
        switch action {
        case .grant: return .success(.authorized)
        case .deny: return .success(.denied)
        case .restrict: return .success(.restricted)
        case .revoke:
            guard current == .authorized else {
                return .failure(
                    ConsentRefusal(
                        description:
                            "there is no consent to revoke: the device is \(current.rawValue.replacingOccurrences(of: "_", with: " ")) (deny it instead)",
                        neededRole: nil))
            }
            return .success(.denied)
        }
    }
}

/// Which of a device's recorded consent changes the coordinator still pushes to its agent.
/// Changes are recorded in one order (the history's ids) and their requests resume, and
/// their pushes arrive, in another; an agent that applied a grant after the denial recorded
/// later would stream what nobody may see. So pushes to a device take turns, and at its
/// turn a push goes out only if its change is still the newest recorded: whatever the
/// interleaving, the last push a device gets carries its newest consent. Pure: the shell
/// keeps the turns and asks here when one comes.
public struct ConsentRelay: Sendable, Equatable {
    private var newest: [String: Int64] = [:]

    public init() {}

    /// A change stored for `deviceID` under history id `changeID`.
    public mutating func recorded(_ changeID: Int64, of deviceID: String) {
        newest[deviceID] = max(newest[deviceID] ?? .min, changeID)
    }

    /// Whether the change's push, now its turn has come, still goes out: false when a later
    /// change was recorded meanwhile (its own push follows and carries it).
    public func shouldPush(_ changeID: Int64, of deviceID: String) -> Bool {
        newest[deviceID].map { changeID >= $0 } ?? true
    }
}

/// The order an agent applies consent changes in. Pushes may arrive out of order (a
/// registration's push read before an operator's change and delivered after it), so a change
/// older than the one the agent holds is stale and is not applied. A change without a time
/// (the coordinator has no record: never set, or the device was removed from the fleet)
/// always applies; it only ever sets not determined, which locks.
public enum ConsentOrder {
    public static func applies(changedAt incoming: Int64, over held: Int64?) -> Bool {
        guard incoming > 0, let held else { return true }
        return incoming >= held
    }
}
