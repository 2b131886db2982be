import FleetStore

/// Who asks, already identified, and the way they came: the operator endpoint (a CURVE key)
/// or the web dashboard (a signed-in browser session). The role is looked up by name for
/// every request either way, so removing an operator or changing their role takes at once.
struct OperatorCaller: Sendable, Equatable {
    enum Channel: Sendable, Equatable {
        case operatorEndpoint
        case dashboard
    }

    var name: String
    var channel: Channel
    /// The peer's address, for the rejection counts.
    var peer: String
    /// The operator's record as read with the caller's dashboard session a moment before this
    /// request, so a grid's previews cost one store read each, not two; nil reads it here.
    var account: OperatorRecord? = nil

    /// Where refusals are counted.
    var endpointName: String { channel == .dashboard ? "dashboard" : OperatorRouter.endpointName }

    /// How the audit log names who acted: "ana", or "ana via dashboard".
    var actor: String { channel == .dashboard ? "\(name) via dashboard" : name }

    /// The name leases and audit entries give an actor who has none.
    static func holder(_ who: String) -> String { who.isEmpty ? "unknown operator" : who }
}
