import FleetBus
import FleetProtocol
import Synchronization

/// What an agent said about the takes it records on its own disk (record.proto, "Takes
/// recorded on the agents"), for the take director.
struct AgentTakeReport: Sendable {
    enum Body: Sendable {
        case segment(Capfleet_V1_AgentSegment)
        case partEnded(Capfleet_V1_AgentPartEnd)
    }
    let nodeID: String
    let routingID: [UInt8]
    let takeID: String
    let deviceID: String
    let body: Body
}

/// What an agent's recordings link says about stills (stills.md): a camera's pictures its index
/// has not acknowledged, or that a node's link is (again) there to copy pictures from.
enum AgentStillNews: Sendable {
    case held(AgentStillReport)
    case attached(nodeID: String)
}

struct AgentStillReport: Sendable {
    let nodeID: String
    let stillID: String
    let deviceID: String
    let captured: Capfleet_V1_StillCaptured
}

/// What the agents' recordings links say, between the record endpoint's thread and async code:
/// where each node's link is (it attaches every 5 s), the reports for the take director and
/// the still director (a stream each: the seam), and the checks waiting for an agent's answer.
/// Made before the record endpoint that fills it; what goes to the agents goes through
/// `AgentRecordLinks`, made after the endpoint.
final class AgentRecordingsDesk: Sendable {
    struct CheckKey: Hashable, Sendable {
        let takeID: String
        let deviceID: String
        let number: UInt32
    }

    /// One segment's copy to one destination by the node that holds it (record.proto,
    /// "Offload"): another node's answer for it is not taken.
    struct OffloadKey: Hashable, Sendable {
        let nodeID: String
        let takeID: String
        let deviceID: String
        let number: UInt32
        let destination: String
    }

    private let routes = Mutex<[String: [UInt8]]>([:])
    private let offloads = Mutex<[OffloadKey: [CheckedContinuation<Capfleet_V1_SegmentOffloaded?, Never>]]>([:])
    /// Bytes sent so far of each copy under way, as its agent last said.
    private let offloadProgress = Mutex<[OffloadKey: UInt64]>([:])
    private let checks = Mutex<[CheckKey: [CheckedContinuation<Capfleet_V1_SegmentCheck?, Never>]]>([:])
    let reports: AsyncStream<AgentTakeReport>
    private let reportSink: AsyncStream<AgentTakeReport>.Continuation
    /// For the still director: one stream, the seam.
    let stillNews: AsyncStream<AgentStillNews>
    private let stillSink: AsyncStream<AgentStillNews>.Continuation

    init() {
        (reports, reportSink) = AsyncStream.makeStream(of: AgentTakeReport.self, bufferingPolicy: .bufferingNewest(10_000))
        (stillNews, stillSink) = AsyncStream.makeStream(of: AgentStillNews.self, bufferingPolicy: .bufferingNewest(10_000))
    }

    // MARK: From the endpoint's thread

    func attached(nodeID: String, routingID: [UInt8]) {
        let isNew = routes.withLock { routes in
            defer { routes[nodeID] = routingID }
            return routes[nodeID] != routingID
        }
        // A link new since this coordinator started (or reconnected): pictures it holds can be copied now.
        if isNew { stillSink.yield(.attached(nodeID: nodeID)) }
    }

    func stillHeld(_ report: AgentStillReport) {
        stillSink.yield(.held(report))
    }

    func reported(_ report: AgentTakeReport) {
        attached(nodeID: report.nodeID, routingID: report.routingID)
        reportSink.yield(report)
    }

    func checked(takeID: String, deviceID: String, _ check: Capfleet_V1_SegmentCheck) {
        let waiting = checks.withLock { $0.removeValue(forKey: CheckKey(takeID: takeID, deviceID: deviceID, number: check.number)) } ?? []
        for continuation in waiting { continuation.resume(returning: check) }
    }

    func offloaded(nodeID: String, takeID: String, deviceID: String, _ result: Capfleet_V1_SegmentOffloaded) {
        let key = OffloadKey(nodeID: nodeID, takeID: takeID, deviceID: deviceID, number: result.number, destination: result.destination)
        let waiting = offloads.withLock { $0.removeValue(forKey: key) } ?? []
        _ = offloadProgress.withLock { $0.removeValue(forKey: key) }
        for continuation in waiting { continuation.resume(returning: result) }
    }

    func offloading(nodeID: String, takeID: String, deviceID: String, _ progress: Capfleet_V1_SegmentOffloading) {
        let key = OffloadKey(nodeID: nodeID, takeID: takeID, deviceID: deviceID, number: progress.number, destination: progress.destination)
        // Only for a copy somebody waits for: a late report after the answer is not news.
        offloadProgress.withLock { sent in
            if offloads.withLock({ $0[key] != nil }) { sent[key] = progress.sentBytes }
        }
    }

    /// Bytes sent so far of the take's copies under way to `destination`.
    func offloadBytesSending(takeID: String, destination: String) -> UInt64 {
        offloadProgress.withLock { sent in
            sent.filter { $0.key.takeID == takeID && $0.key.destination == destination }.reduce(0) { $0 + $1.value }
        }
    }

    /// Waits for the node's answer to an offload that `order` sends, ordering it again every
    /// `reorder` (an order lost) and at once when the node's link comes back on a new
    /// connection (its agent restarted, and forgot the copy); nil when `stillThere` says the
    /// node is gone, or the waiter is cancelled.
    func awaitOffload(
        _ key: OffloadKey, reorder: Duration, order: @escaping @Sendable () -> Bool, stillThere: @escaping @Sendable () async -> Bool
    ) async -> Capfleet_V1_SegmentOffloaded? {
        let look = Duration.seconds(2)
        return await withTaskGroup(of: Capfleet_V1_SegmentOffloaded?.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    self.offloads.withLock { $0[key, default: []].append(continuation) }
                    _ = order()
                }
            }
            group.addTask {
                var ordered = ContinuousClock.now
                var route = self.route(of: key.nodeID)
                var awaySince: ContinuousClock.Instant?
                while !Task.isCancelled {
                    try? await Task.sleep(for: look)
                    guard !Task.isCancelled else { return nil }
                    let now = ContinuousClock.now
                    // A node away a little (a restart, a short partition) is waited for.
                    guard await stillThere() else {
                        let since = awaySince ?? now
                        awaySince = since
                        if now - since >= Self.offloadPatience { return nil }
                        continue
                    }
                    awaySince = nil
                    let current = self.route(of: key.nodeID)
                    guard current != route || now - ordered >= reorder else { continue }
                    // The agent takes an order for a copy under way as that copy.
                    route = current
                    ordered = now
                    _ = order()
                }
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            let left = self.offloads.withLock { $0.removeValue(forKey: key) } ?? []
            _ = self.offloadProgress.withLock { $0.removeValue(forKey: key) }
            for continuation in left { continuation.resume(returning: nil) }
            return first
        }
    }

    /// How long an offload waits for its node to come back before it gives up on it.
    static let offloadPatience = Duration.seconds(120)

    /// Each stream ends on its own: a daemon part that ends before its turn at shutdown
    /// stops the whole coordinator with an error.
    func finishReports() { reportSink.finish() }

    func finishStillNews() { stillSink.finish() }

    // MARK: For the links

    /// The connection of the node's link; nil if it never attached (since this coordinator started).
    func route(of nodeID: String) -> [UInt8]? { routes.withLock { $0[nodeID] } }

    /// Waits for the node's answer to a check that `ask` sends (false: it could not, and
    /// `unsent` is the answer); nil if none came within `timeout`.
    func awaitCheck(
        _ key: CheckKey, timeout: Duration, ask: @escaping @Sendable () -> Bool, unsent: Capfleet_V1_SegmentCheck
    ) async -> Capfleet_V1_SegmentCheck? {
        await withTaskGroup(of: Capfleet_V1_SegmentCheck?.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    self.checks.withLock { $0[key, default: []].append(continuation) }
                    if !ask() { self.checked(takeID: key.takeID, deviceID: key.deviceID, unsent) }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            // Whoever still waits (the timeout came first) hears nothing more.
            let left = self.checks.withLock { $0.removeValue(forKey: key) } ?? []
            for continuation in left { continuation.resume(returning: nil) }
            return first
        }
    }
}

/// The agents' recordings links as the coordinator's parts reach them: where each node's link
/// is (the desk) and the record endpoint's send.
struct AgentRecordLinks: Sendable {
    let desk: AgentRecordingsDesk
    /// Sends to one connection of the record endpoint (dropped if it is gone).
    let sendToConnection: @Sendable ([UInt8], Capfleet_V1_RecordDown) -> Void

    init(desk: AgentRecordingsDesk, send: @escaping @Sendable ([UInt8], Capfleet_V1_RecordDown) -> Void) {
        self.desk = desk
        sendToConnection = send
    }

    /// Whether the node's link has attached (since this coordinator started).
    func isReachable(_ nodeID: String) -> Bool { desk.route(of: nodeID) != nil }

    /// Sends to the node's link; false if it never attached.
    @discardableResult
    func send(to nodeID: String, takeID: String, deviceID: String, _ body: Capfleet_V1_RecordDown.OneOf_Body) -> Bool {
        guard let routing = desk.route(of: nodeID) else { return false }
        sendToConnection(
            routing,
            .with {
                $0.takeID = takeID
                $0.deviceID = deviceID
                $0.body = body
            })
        return true
    }

    /// Asks the node to check a segment's file against the index; nil if it did not answer
    /// within `timeout` (reading a large segment back takes a while: the caller says how long).
    func check(
        nodeID: String, takeID: String, deviceID: String, _ request: Capfleet_V1_CheckSegment, timeout: Duration
    ) async -> Capfleet_V1_SegmentCheck? {
        await desk.awaitCheck(
            AgentRecordingsDesk.CheckKey(takeID: takeID, deviceID: deviceID, number: request.number), timeout: timeout,
            ask: { send(to: nodeID, takeID: takeID, deviceID: deviceID, .check(request)) },
            unsent: .with {
                $0.number = request.number
                $0.problems = [
                    "node \(nodeID)'s recordings link has not reached this coordinator since it started: the node is offline, or its agent predates takes recorded on agents"
                ]
            })
    }
}
