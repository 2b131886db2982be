import FleetCore
import FleetProtocol
import Synchronization

/// What the control dialog hears of the fleet's nodes and devices that other parts act on.
enum NodeEvent: Sendable {
    /// A node registered (again) with these devices.
    case registered(nodeID: String, deviceIDs: [String])
    /// A node missed its heartbeats.
    case offline(nodeID: String)
    /// A device's own event; `kind` names it as takes' timed metadata does (interrupted,
    /// resumed, zoom, …).
    case device(deviceID: String, kind: String, detail: String)
    /// A detection report from the node that has the device.
    case detection(Capfleet_V1_DetectionReport)
    /// A batch of a sensor stream's readings from the node that has the stream.
    case sensorData(Capfleet_V1_SensorData)
    /// A node's status (about once a second): its devices' counters and its clock, as takes'
    /// sync reports read them, heard at `atFleetNs`.
    case status(samples: [TakeSyncSample], atFleetNs: UInt64)
}

/// The one stream of node events, made before the control handler that publishes them and
/// read by takes, live flow and detections, each through a subscription of its own taken at
/// assembly. So the control handler depends on none of them: they depend on it.
///
/// Every subscription sees every event in order. Its buffer is unbounded: nothing is dropped,
/// and each reader only notes an event (a book update, a publish) before taking the next.
final class NodeEventFeed: Sendable {
    struct Subscription: Sendable {
        let events: AsyncStream<NodeEvent>
        fileprivate let continuation: AsyncStream<NodeEvent>.Continuation

        /// Ends this reader's stream (its service is stopping).
        func end() { continuation.finish() }
    }

    private let readers = Mutex<[AsyncStream<NodeEvent>.Continuation]>([])

    /// A reader's stream of every event published from now on.
    func subscribe() -> Subscription {
        let (events, continuation) = AsyncStream.makeStream(of: NodeEvent.self, bufferingPolicy: .unbounded)
        readers.withLock { $0.append(continuation) }
        return Subscription(events: events, continuation: continuation)
    }

    func publish(_ event: NodeEvent) {
        for reader in readers.withLock({ $0 }) { reader.yield(event) }
    }
}
