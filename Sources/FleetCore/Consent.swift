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
    public static func apply(_ action: ConsentAction, to current: ConsentState, by role: OperatorRole,
                             reason: String) -> Result<ConsentState, ConsentRefusal> {
        guard !reason.allSatisfy(\.isWhitespace) else {
            return .failure(ConsentRefusal(description: "say why with --reason: every consent change is kept with who, when and why", neededRole: nil))
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
                return .failure(ConsentRefusal(description: "there is no consent to revoke: the device is \(current.rawValue.replacingOccurrences(of: "_", with: " ")) (deny it instead)", neededRole: nil))
            }
            return .success(.denied)
        }
    }
}
