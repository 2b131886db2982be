/// Decides when a node is online or offline from its heartbeats, as in the zguide's
/// Paranoid Pirate pattern: a node that misses `liveness` heartbeat intervals is gone.
/// Pure state: the caller passes the time in and performs the returned transitions.
public struct NodeLiveness: Sendable {
    public enum Transition: Equatable, Sendable {
        case cameOnline(nodeID: String)
        case wentOffline(nodeID: String)
    }

    public let heartbeatIntervalNanoseconds: UInt64
    public let liveness: UInt64
    private var lastHeard: [String: UInt64] = [:]

    public init(heartbeatIntervalNanoseconds: UInt64, liveness: UInt64) {
        self.heartbeatIntervalNanoseconds = heartbeatIntervalNanoseconds
        self.liveness = liveness
    }

    public var onlineNodes: Set<String> { Set(lastHeard.keys) }

    public func isOnline(_ nodeID: String) -> Bool { lastHeard[nodeID] != nil }

    /// Anything heard from the node counts as a heartbeat.
    public mutating func heard(from nodeID: String, at now: UInt64) -> Transition? {
        let wasOnline = lastHeard[nodeID] != nil
        lastHeard[nodeID] = now
        return wasOnline ? nil : .cameOnline(nodeID: nodeID)
    }

    /// Traffic from an online node that arrived at `time` but is not handled yet still
    /// proves it alive; an offline node comes back only by being heard. Never moves back.
    public mutating func refresh(_ nodeID: String, arrivedAt time: UInt64) {
        guard let last = lastHeard[nodeID], time > last else { return }
        lastHeard[nodeID] = time
    }

    /// Marks nodes offline whose silence exceeds `liveness` intervals.
    public mutating func expire(at now: UInt64) -> [Transition] {
        let deadline = heartbeatIntervalNanoseconds * liveness
        let expired = lastHeard.filter { now > $0.value && now - $0.value > deadline }.keys.sorted()
        for nodeID in expired { lastHeard[nodeID] = nil }
        return expired.map { .wentOffline(nodeID: $0) }
    }

    /// The node said goodbye or was forgotten.
    public mutating func remove(_ nodeID: String) -> Transition? {
        lastHeard.removeValue(forKey: nodeID) == nil ? nil : .wentOffline(nodeID: nodeID)
    }
}
