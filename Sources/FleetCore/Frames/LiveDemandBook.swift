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
        /// Viewers of the device's encoded stream (a take's H.264 or HEVC packets), which
        /// want those packets and no raw frame.
        case encodedViewers
        /// A dashboard page showing the device's full-rate live view, for as long as it is open.
        case dashboard(UInt64)

        public var description: String {
            switch self {
            case .viewers: "viewers"
            case let .snapshot(id): "snapshot \(id)"
            case let .dashboard(id): "dashboard view \(id)"
            case .encodedViewers: "viewers of the encoded stream"
            }
        }

        var wantsRawFrames: Bool { self != .encodedViewers }
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
        /// Tell the node which of its devices' raw frames, and which of their encoded packets,
        /// are wanted now (sorted; may be empty).
        case announce(nodeID: String, deviceIDs: [String], encodedDeviceIDs: [String])
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

    /// The node's devices whose raw frames are wanted now, sorted.
    public func wantedDevices(of nodeID: String) -> [String] {
        consumers.filter { nodeOf[$0.key] == nodeID && $0.value.contains(where: \.wantsRawFrames) }.keys.sorted()
    }

    /// The node's devices whose encoded packets are wanted now, sorted.
    public func encodedDevices(of nodeID: String) -> [String] {
        consumers.filter { nodeOf[$0.key] == nodeID && $0.value.contains(.encodedViewers) }.keys.sorted()
    }

    /// What the device's node is told of it: raw frames wanted, encoded packets wanted.
    private func kinds(of deviceID: String) -> (raw: Bool, encoded: Bool) {
        let wanting = consumers[deviceID] ?? []
        return (wanting.contains(where: \.wantsRawFrames), wanting.contains(.encodedViewers))
    }

    public mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case let .wanted(deviceID, consumer):
            let before = kinds(of: deviceID)
            let inserted = consumers[deviceID, default: []].insert(consumer).inserted
            guard inserted else { return [] }
            let changed = kinds(of: deviceID) != before ? announcement(for: deviceID) : []
            guard consumers[deviceID]?.count == 1 else { return changed }
            return [.flowWanted(deviceID: deviceID, consumers: consumerNames(of: deviceID))] + changed
        case let .unwanted(deviceID, consumer):
            let before = kinds(of: deviceID)
            guard consumers[deviceID]?.remove(consumer) != nil else { return [] }
            let empty = consumers[deviceID]?.isEmpty == true
            if empty { consumers[deviceID] = nil }
            let changed = kinds(of: deviceID) != before ? announcement(for: deviceID) : []
            return (empty ? [.flowUnwanted(deviceID: deviceID)] : []) + changed
        case let .located(deviceID, nodeID):
            let previous = nodeOf.updateValue(nodeID, forKey: deviceID)
            guard previous != nodeID, consumers[deviceID] != nil else { return [] }
            var actions: [Action] = []
            if let previous { actions.append(announce(previous)) }
            actions.append(announce(nodeID))
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
            return actions + nodes.sorted().map(announce)
        case let .nodeRegistered(nodeID):
            let wanted = consumers.keys.contains { nodeOf[$0] == nodeID }
            return wanted ? [announce(nodeID)] : []
        case .renewalDue:
            let nodes = Set(consumers.keys.compactMap { nodeOf[$0] })
            return nodes.sorted().map(announce)
        }
    }

    /// The device's node hears its new sets, if the device has a node yet.
    private func announcement(for deviceID: String) -> [Action] {
        guard let node = nodeOf[deviceID] else { return [] }
        return [announce(node)]
    }

    private func announce(_ nodeID: String) -> Action {
        .announce(nodeID: nodeID, deviceIDs: wantedDevices(of: nodeID), encodedDeviceIDs: encodedDevices(of: nodeID))
    }
}
