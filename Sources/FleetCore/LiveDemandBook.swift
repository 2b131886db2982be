/// Who wants each device's full-rate frames, and what the coordinator tells each node so that
/// frames cross the network only while someone wants them (frames.md, "Live frames on demand").
///
/// A node hears the whole set of its wanted devices in one message, again every second
/// while the set is not empty (a lease the agent lets run out if the coordinator goes
/// silent), and at once when the set changes or the node registers anew.
public struct LiveDemandBook: Sendable {
    /// One reason to want a device's frames.
    public enum Consumer: Hashable, Sendable, CustomStringConvertible {
        /// Viewers subscribed to the device's topic on the live endpoint: its XPUB says when
        /// the first one comes and the last one goes, so they count as one.
        case viewers
        /// An operator's snapshot waiting for the device's next frame.
        case snapshot(UInt64)

        public var description: String {
            switch self {
            case .viewers: "viewers"
            case let .snapshot(id): "snapshot \(id)"
            }
        }
    }

    public enum Event: Sendable {
        case wanted(deviceID: String, by: Consumer)
        case unwanted(deviceID: String, by: Consumer)
        /// The device registered at `nodeID` (a node's devices may move when it re-registers).
        case located(deviceID: String, nodeID: String)
        /// The devices left the fleet: nobody's wish brings their frames any more.
        case forgotten(deviceIDs: [String])
        /// The node (re)registered: it starts with no wanted device, so it hears its set again.
        case nodeRegistered(nodeID: String)
        /// A second went by: every node with a wanted device hears its set again.
        case renewalDue
    }

    public enum Action: Equatable, Sendable {
        /// Tell the node which of its devices' frames are wanted now (sorted; may be empty).
        case announce(nodeID: String, deviceIDs: [String])
        /// The device's frames became wanted (first consumer) or not (last one gone).
        case flowWanted(deviceID: String, consumers: [String])
        case flowUnwanted(deviceID: String)
    }

    private var consumers: [String: Set<Consumer>] = [:]
    private var nodeOf: [String: String] = [:]

    public init() {}

    /// How many consumers want the device's frames now.
    public func consumerCount(of deviceID: String) -> Int { consumers[deviceID]?.count ?? 0 }

    /// Who wants the device's frames now, for listings.
    public func consumerNames(of deviceID: String) -> [String] { (consumers[deviceID] ?? []).map(\.description).sorted() }

    /// The node's devices whose frames are wanted now, sorted.
    public func wantedDevices(of nodeID: String) -> [String] {
        consumers.keys.filter { nodeOf[$0] == nodeID }.sorted()
    }

    public mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case let .wanted(deviceID, consumer):
            let inserted = consumers[deviceID, default: []].insert(consumer).inserted
            guard inserted else { return [] }
            guard consumers[deviceID]?.count == 1 else { return [] }
            return [.flowWanted(deviceID: deviceID, consumers: consumerNames(of: deviceID))] + announcement(for: deviceID)
        case let .unwanted(deviceID, consumer):
            guard consumers[deviceID]?.remove(consumer) != nil else { return [] }
            guard consumers[deviceID]?.isEmpty == true else { return [] }
            consumers[deviceID] = nil
            return [.flowUnwanted(deviceID: deviceID)] + announcement(for: deviceID)
        case let .located(deviceID, nodeID):
            let previous = nodeOf.updateValue(nodeID, forKey: deviceID)
            guard previous != nodeID, consumers[deviceID] != nil else { return [] }
            var actions: [Action] = []
            if let previous { actions.append(.announce(nodeID: previous, deviceIDs: wantedDevices(of: previous))) }
            actions.append(.announce(nodeID: nodeID, deviceIDs: wantedDevices(of: nodeID)))
            return actions
        case let .forgotten(deviceIDs):
            var actions: [Action] = []
            var nodes: Set<String> = []
            for deviceID in deviceIDs {
                if consumers.removeValue(forKey: deviceID) != nil {
                    actions.append(.flowUnwanted(deviceID: deviceID))
                    if let node = nodeOf[deviceID] { nodes.insert(node) }
                }
                nodeOf[deviceID] = nil
            }
            return actions + nodes.sorted().map { .announce(nodeID: $0, deviceIDs: wantedDevices(of: $0)) }
        case let .nodeRegistered(nodeID):
            let wanted = wantedDevices(of: nodeID)
            return wanted.isEmpty ? [] : [.announce(nodeID: nodeID, deviceIDs: wanted)]
        case .renewalDue:
            let nodes = Set(consumers.keys.compactMap { nodeOf[$0] })
            return nodes.sorted().map { .announce(nodeID: $0, deviceIDs: wantedDevices(of: $0)) }
        }
    }

    /// The device's node hears its new set, if the device has a node yet.
    private func announcement(for deviceID: String) -> [Action] {
        guard let node = nodeOf[deviceID] else { return [] }
        return [.announce(nodeID: node, deviceIDs: wantedDevices(of: node))]
    }
}
