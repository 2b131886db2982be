import FleetCore
import FleetProtocol
import FleetStore
import Foundation
import Logging

/// `recordings collect`: copies a take's agent-held segments to the coordinator in the
/// background, one segment at a time per node (the nodes in parallel), each marked collected
/// in the index once its copy is verified, and told to its agent (whose retention may then
/// remove it). One run per take at a time; asked again while one runs, it is that run.
actor TakeCollections {
    private let store: FleetDatabase
    private let collector: SegmentCollector
    private let links: AgentRecordLinks
    private let events: FleetEvents
    private let clock: CoordinatorClock
    private let logger: Logger
    /// Whether a node is registered now: an offline node's segments are not asked for.
    private let isOnline: @Sendable (String) async -> Bool
    private var running: [String: Task<Void, Never>] = [:]

    init(
        store: FleetDatabase, collector: SegmentCollector, links: AgentRecordLinks, events: FleetEvents, clock: CoordinatorClock, logger: Logger,
        isOnline: @escaping @Sendable (String) async -> Bool
    ) {
        self.isOnline = isOnline
        self.store = store
        self.collector = collector
        self.links = links
        self.events = events
        self.clock = clock
        self.logger = logger
    }

    /// Starts collecting `take` unless a run is under way. Returns the segments left to copy.
    func collect(_ take: TakeRecord, by caller: String) async throws(StoreError) -> Int {
        let segments = try await store.uncollectedSegments(takeID: take.id).filter { !$0.sha256.isEmpty }
        guard running[take.id] == nil, !segments.isEmpty else { return segments.count }
        try await store.setCollectError(takeID: take.id, error: "")
        running[take.id] = Task { await self.run(take, segments: segments, by: caller) }
        return segments.count
    }

    func isRunning(_ takeID: String) -> Bool { running[takeID] != nil }

    /// Bytes copied so far of the take's segments being copied now (not yet in the index).
    nonisolated func bytesArriving(takeID: String) -> UInt64 { collector.bytesArriving(takeID: takeID) }

    private func run(_ take: TakeRecord, segments: [SegmentRecord], by caller: String) async {
        let byNode = Dictionary(grouping: segments) { $0.nodeId ?? "" }
        let failures = await withTaskGroup(of: [String].self) { group in
            for (nodeID, own) in byNode {
                group.addTask { await self.collect(own, from: nodeID, of: take) }
            }
            var all: [String] = []
            for await failed in group { all += failed }
            return all
        }
        running[take.id] = nil
        let message =
            failures.isEmpty
            ? "take \(take.id): \(segments.count) agent-held segments collected"
            : "take \(take.id): collect failed: " + failures.joined(separator: "; ")
        events.emit(.recording, message: message)
        logger.notice("collect ended", metadata: ["take.id": "\(take.id)", "failures": "\(failures.count)", "by": "\(caller)"])
        do {
            try await store.setCollectError(takeID: take.id, error: failures.joined(separator: "; "))
        } catch {
            logger.error("cannot record how a collect ended", metadata: ["take.id": "\(take.id)", "error": "\(error)"])
        }
    }

    /// One node's segments in order; stops at its first failure (the node is gone, most likely).
    private func collect(_ segments: [SegmentRecord], from nodeID: String, of take: TakeRecord) async -> [String] {
        guard await isOnline(nodeID) else {
            let missing = segments.map { "\($0.deviceId) #\($0.number)" }.joined(separator: ", ")
            return ["node \(nodeID) is offline: its segments \(missing) are only on its disk, and missing until it is back"]
        }
        for segment in segments.sorted(by: { ($0.deviceId, $0.number) < ($1.deviceId, $1.number) }) {
            let destination = take.directory + "/" + segment.deviceId + "/" + (segment.path as NSString).lastPathComponent
            switch await collector.collect(segment, from: nodeID, to: destination, through: links) {
            case let .success(path):
                do {
                    try await store.markSegmentCollected(
                        takeID: take.id, deviceID: segment.deviceId, number: segment.number, path: path,
                        at: clock.unixMilliseconds())
                } catch {
                    return ["segment \(segment.number) of \(segment.deviceId) was copied to \(path) but the index could not record it: \(error)"]
                }
                links.send(to: nodeID, takeID: take.id, deviceID: segment.deviceId, .collected(.with { $0.number = UInt32(segment.number) }))
            case let .failure(failure):
                return [failure.description]
            }
        }
        return []
    }
}
