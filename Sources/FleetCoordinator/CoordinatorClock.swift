import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// The coordinator's clocks, injected so its services are tested at times a test chooses:
/// fleet time (ns, what takes and frames are stamped in), wall time (ms, what the index and
/// the audit log record) and monotonic time (ns, what liveness and command deadlines count).
struct CoordinatorClock: Sendable {
    let fleetNow: @Sendable () -> UInt64
    let unixMilliseconds: @Sendable () -> UnixMilliseconds
    let monotonicNow: @Sendable () -> UInt64
    /// Where this run's frame-alignment grid starts (FleetTimeSource.alignmentGridOrigin);
    /// 0 where none was chosen (tests).
    let gridOrigin: UInt64

    init(
        fleetNow: @escaping @Sendable () -> UInt64, unixMilliseconds: @escaping @Sendable () -> UnixMilliseconds,
        monotonicNow: @escaping @Sendable () -> UInt64 = { MonotonicTime.now() }, gridOrigin: UInt64 = 0
    ) {
        self.fleetNow = fleetNow
        self.unixMilliseconds = unixMilliseconds
        self.monotonicNow = monotonicNow
        self.gridOrigin = gridOrigin
    }

    static func system(_ fleetTime: FleetTimeSource) -> CoordinatorClock {
        CoordinatorClock(
            fleetNow: { fleetTime.now() }, unixMilliseconds: WallClock.system.unixMilliseconds, gridOrigin: fleetTime.alignmentGridOrigin)
    }
}

/// What the take director needs of the agents' side: whether a node is reachable, and a
/// command answered (ControlHandler, over the control endpoint).
protocol AgentCommands: Sendable {
    func isOnline(_ nodeID: String) async -> Bool
    func command(_ action: Capfleet_V1_Command.OneOf_Action, deviceID: String, nodeID: String, timeout: Duration) async -> Capfleet_V1_CommandReply
}
