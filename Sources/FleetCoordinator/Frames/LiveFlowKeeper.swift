import FleetCore
import FleetProtocol
import Logging

/// Performs what `LiveDemandBook` decides: tells nodes which devices' full-rate frames are
/// wanted, renews that every second while anyone wants some, and says when a device's flow
/// starts and stops (an event, and the consumers in listings).
actor LiveFlowKeeper {
    /// How long an agent keeps sending after the coordinator last said a device is wanted:
    /// three renewals, so one lost message does not stop a viewer's picture.
    static let leaseMilliseconds: UInt32 = 3000

    private var book = LiveDemandBook()
    private let tell: @Sendable (_ nodeID: String, _ message: Capfleet_V1_LiveFrames) async -> Void
    private let events: FleetEvents
    private let logger: Logger
    private var nextSnapshotID: UInt64 = 0

    init(
        events: FleetEvents, logger: Logger,
        tell: @escaping @Sendable (_ nodeID: String, _ message: Capfleet_V1_LiveFrames) async -> Void
    ) {
        self.events = events
        self.logger = logger
        self.tell = tell
    }

    /// Follows the live endpoint's viewers until the endpoint closes.
    func follow(_ subscriptions: AsyncStream<LiveSubscriptionChange>) async {
        for await change in subscriptions {
            let consumer: LiveDemandBook.Consumer = change.encoded ? .encodedViewers : .viewers
            await handle(change.wanted ? .wanted(deviceID: change.deviceID, by: consumer) : .unwanted(deviceID: change.deviceID, by: consumer))
        }
    }

    /// Follows the fleet's node events until the feed ends: a node that registers hears its set
    /// (a new agent process wants no device's frames until told).
    func follow(nodeEvents: AsyncStream<NodeEvent>) async {
        for await event in nodeEvents {
            guard case let .registered(nodeID, deviceIDs) = event else { continue }
            await registered(nodeID: nodeID, deviceIDs: deviceIDs)
        }
    }

    /// Once a second: the nodes with wanted devices hear their sets again.
    func renew() async { await handle(.renewalDue) }

    /// A node registered with these devices: they are located there, and it hears its set.
    func registered(nodeID: String, deviceIDs: [String]) async {
        for deviceID in deviceIDs { await handle(.located(deviceID: deviceID, nodeID: nodeID)) }
        await handle(.nodeRegistered(nodeID: nodeID))
    }

    func forgotten(_ deviceIDs: [String]) async { await handle(.forgotten(deviceIDs: deviceIDs)) }

    /// Wants the device's frames for as long as `body` runs: a snapshot waiting for a frame,
    /// or (`dashboard`) a page's live view while it is open.
    func whileWanting<T: Sendable>(_ deviceID: String, dashboard: Bool = false, _ body: @Sendable () async -> T) async -> T {
        nextSnapshotID += 1
        let consumer: LiveDemandBook.Consumer = dashboard ? .dashboard(nextSnapshotID) : .snapshot(nextSnapshotID)
        await handle(.wanted(deviceID: deviceID, by: consumer))
        let result = await body()
        await handle(.unwanted(deviceID: deviceID, by: consumer))
        return result
    }

    /// Who wants each of these devices' frames now, for listings.
    func consumers(of deviceIDs: [String]) -> [String: [String]] {
        var named: [String: [String]] = [:]
        for deviceID in deviceIDs {
            let names = book.consumerNames(of: deviceID)
            if !names.isEmpty { named[deviceID] = names }
        }
        return named
    }

    private func handle(_ event: LiveDemandBook.Event) async {
        for action in book.handle(event) {
            switch action {
            case let .announce(nodeID, deviceIDs, encodedDeviceIDs):
                await tell(
                    nodeID,
                    .with {
                        $0.deviceIds = deviceIDs
                        $0.encodedDeviceIds = encodedDeviceIDs
                        $0.leaseMs = Self.leaseMilliseconds
                    })
            case let .flowWanted(deviceID, consumers):
                logger.info("live frames wanted", metadata: ["device.id": "\(deviceID)", "by": "\(consumers.joined(separator: ", "))"])
                events.emit(
                    .liveFrames, deviceID: deviceID,
                    message: "full-rate frames of \(deviceID) wanted (\(consumers.joined(separator: ", "))): the flow to the coordinator starts")
            case let .flowUnwanted(deviceID):
                logger.info("live frames no longer wanted", metadata: ["device.id": "\(deviceID)"])
                events.emit(
                    .liveFrames, deviceID: deviceID,
                    message: "nobody wants full-rate frames of \(deviceID) any more: the flow to the coordinator stops")
            }
        }
    }
}
