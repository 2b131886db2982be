import FleetProtocol

/// What an operator's key may do (security.md, "Roles"). Each role can do what the
/// roles below it can: viewers look, operators also steer devices and record, admins also
/// enroll and revoke nodes and manage operators.
public enum OperatorRole: String, Sendable, CaseIterable, Comparable {
    case viewer, `operator`, admin

    private var rank: Int {
        switch self {
        case .viewer: 1
        case .operator: 2
        case .admin: 3
        }
    }

    public static func < (lhs: OperatorRole, rhs: OperatorRole) -> Bool { lhs.rank < rhs.rank }

    public init?(wire: Capfleet_V1_OperatorRole) {
        switch wire {
        case .viewer: self = .viewer
        case .operator: self = .operator
        case .admin: self = .admin
        default: return nil
        }
    }

    public var wire: Capfleet_V1_OperatorRole {
        switch self {
        case .viewer: .viewer
        case .operator: .operator
        case .admin: .admin
        }
    }
}

/// The role each operator request needs. Looking is for viewers; anything that changes a
/// device is for operators; who may enter the fleet is for admins.
public enum RequiredRole {
    public static func of(_ body: Capfleet_V1_OperatorRequest.OneOf_Body?) -> OperatorRole {
        switch body {
        case .listNodes?, .listDevices?, .getFormats?, .getFleetStats?, .getLatestFrame?, .getIngestStats?, .getDevice?,
            .getEvents?, .endSession?, .whoAmI?, .getConsentHistory?, .syncCheck?, .syncAudit?,
            .listRecordings?, .getRecording?, .getFrameSets?, .verifyRecording?, .readSegment?, .getPreview?, .listPreviews?, nil,
            .listStills?, .getStill?, .readStillFile?, .listMoments?, .listMomentRules?, .listStorage?,
            // One's own sign-in link; another operator's is checked for admin by the handler.
            .createDashboardSignIn?:
            .viewer
        case .changeFormat?, .changeFrameRate?, .changeZoom?, .lockDevice?, .unlockDevice?, .changeFocus?,
            .setDropRecoveryPolicy?, .changePressurePolicy?, .changeConsent?, .changeFrameAlignment?,
            .startRecording?, .stopRecording?, .deleteRecording?, .noteRecording?, .collectRecording?, .offloadRecording?,
            .takeStill?, .deleteStill?, .changeDetection?, .setDeviceOptics?, .changeAudioProcessing?,
            .changeControl?, .changeRegion?, .changePreRoll?, .takeMoment?, .changeMomentRule?:
            .operator
        case .forgetNode?, .createEnrollment?, .listEnrollments?, .revokeEnrollment?, .revokeNode?, .addOperator?, .removeOperator?, .listOperators?,
            .backupDatabase?, .changeStorage?,
            .listDashboardSessions?, .endDashboardSession?:
            .admin
        }
    }
}

/// Rules on the fleet's operators as a whole, as opposed to what one operator may do
/// (`RequiredRole`). Pure: the store applies them inside the transaction that changes the
/// roster, so that the check and the change are one step.
public enum OperatorRoster {
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        public let name: String
        public var description: String {
            "\(name) is the last admin; add another admin first, or nobody could manage the fleet"
        }
    }

    /// Why `name` may not be removed from `roster`, or nil if it may (an unknown name is the
    /// caller's "not found", not a refusal). An operator whose role is unreadable counts as
    /// no admin.
    public static func refusal(removing name: String, from roster: [(name: String, role: OperatorRole?)]) -> Refusal? {
        isLastAdmin(name, in: roster) ? Refusal(name: name) : nil
    }

    /// Why `name` may not be given `role` (re-adding an operator replaces their role), or nil.
    public static func refusal(giving role: OperatorRole, to name: String, in roster: [(name: String, role: OperatorRole?)]) -> Refusal? {
        role != .admin && isLastAdmin(name, in: roster) ? Refusal(name: name) : nil
    }

    private static func isLastAdmin(_ name: String, in roster: [(name: String, role: OperatorRole?)]) -> Bool {
        roster.filter { $0.role == .admin }.map(\.name) == [name]
    }
}
