import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// The coordinator's clocks, injected so its services are tested at times a test chooses:
/// fleet time (ns, what takes and frames are stamped in) and wall time (ms, what the index
/// and the audit log record).
struct CoordinatorClock: Sendable {
    let fleetNow: @Sendable () -> UInt64
    let unixMilliseconds: @Sendable () -> UnixMilliseconds

    static func system(_ fleetTime: FleetTimeSource) -> CoordinatorClock {
        CoordinatorClock(fleetNow: { fleetTime.now() }, unixMilliseconds: { Date().unixMilliseconds })
    }

    /// The system's clocks with a fleet time of their own: the default of services that read
    /// only wall time and that CoordinatorService does not yet hand its clock.
    static var standalone: CoordinatorClock { .system(FleetTimeSource()) }
}

/// What the take director needs of the agents' side: whether a node is reachable, and a
/// command answered (ControlHandler, over the control endpoint).
protocol AgentCommands: Sendable {
    func isOnline(_ nodeID: String) async -> Bool
    func command(_ action: Capfleet_V1_Command.OneOf_Action, deviceID: String, nodeID: String, timeout: Duration) async -> Capfleet_V1_CommandReply
}


