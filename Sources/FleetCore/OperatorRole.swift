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
             .getEvents?, .endSession?, .whoAmI?, .getConsentHistory?, .syncCheck?,
             .listRecordings?, .getRecording?, .verifyRecording?, .readSegment?, nil:
            .viewer
        case .changeFormat?, .changeFrameRate?, .changeZoom?, .lockDevice?, .unlockDevice?, .changeFocus?,
             .setDropRecoveryPolicy?, .changePressurePolicy?, .changeConsent?, .changeFrameAlignment?,
             .startRecording?, .stopRecording?, .deleteRecording?, .noteRecording?:
            .operator
        case .forgetNode?, .createEnrollment?, .revokeNode?, .addOperator?, .removeOperator?, .listOperators?, .backupDatabase?:
            .admin
        }
    }
}
