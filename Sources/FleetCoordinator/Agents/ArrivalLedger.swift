import FleetBus
import Synchronization

/// When each node's last control message came off the wire, noted on the control socket's
/// thread. The control handler works through messages one at a time, and a slow one (a
/// camera with hundreds of formats registering on a loaded host) must not make the nodes
/// whose heartbeats wait behind it look silent: traffic that arrived proves them alive.
final class ArrivalLedger: Sendable {
    private let arrivals = Mutex<[String: UInt64]>([:])
    /// The monotonic clock liveness is judged on (the coordinator's, injected).
    private let now: @Sendable () -> UInt64

    init(now: @escaping @Sendable () -> UInt64) {
        self.now = now
    }

    /// Called on the control endpoint's thread for every message.
    func note(_ message: RoutedMessage) {
        guard case let .node(id, _)? = Principal(userID: message.userID) else { return }
        let arrived = now()
        arrivals.withLock { $0[id] = arrived }
    }

    func latest() -> [String: UInt64] { arrivals.withLock { $0 } }

    func forget(_ nodeID: String) { _ = arrivals.withLock { $0.removeValue(forKey: nodeID) } }
}
