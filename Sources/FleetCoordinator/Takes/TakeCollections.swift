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
    /// Proved copies on storage destinations, for segments their hosts cannot give.
    private let copies: DestinationCopies
    private let links: AgentRecordLinks
    private let events: FleetEvents
    private let clock: CoordinatorClock
    private let logger: Logger
    /// Whether a node is registered now: an offline node's segments are not asked for.
    private let isOnline: @Sendable (String) async -> Bool
    private var running: [String: Task<Void, Never>] = [:]

    init(
        store: FleetDatabase, collector: SegmentCollector, copies: DestinationCopies, links: AgentRecordLinks, events: FleetEvents,
        clock: CoordinatorClock, logger: Logger, isOnline: @escaping @Sendable (String) async -> Bool
    ) {
        self.copies = copies
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

    /// One node's segments in order. After the node's first failure (it is gone, most likely)
    /// it is not asked again; a segment it cannot give is read from a storage destination that
    /// holds a proved copy, if one does (recordings.md, "Reading back").
    private func collect(_ segments: [SegmentRecord], from nodeID: String, of take: TakeRecord) async -> [String] {
        var nodeFailure: String? =
            await isOnline(nodeID) ? nil : "node \(nodeID) is offline: its segments are only on its disk, and missing until it is back"
        var missing: [String] = []
        var failures: [String] = []
        for segment in segments.sorted(by: { ($0.deviceId, $0.number) < ($1.deviceId, $1.number) }) {
            let destination = take.directory + "/" + segment.deviceId + "/" + (segment.path as NSString).lastPathComponent
            var result: Result<String, CollectFailure> = .failure(CollectFailure(nodeFailure ?? ""))
            var from = "node \(nodeID)"
            if nodeFailure == nil {
                result = await collector.collect(segment, from: nodeID, to: destination, through: links)
                if case let .failure(failure) = result { nodeFailure = failure.description }
            }
            if case .failure = result {
                do {
                    if let copy = try await copies.provedCopy(of: segment) {
                        from = copy.label
                        result = await copies.download(copy, of: segment, to: destination)
                    }
                } catch {
                    result = .failure(
                        CollectFailure("the index's copies of segment \(segment.number) of \(segment.deviceId) cannot be read: \(error)"))
                }
            }
            switch result {
            case let .success(path):
                do {
                    try await store.markSegmentCollected(
                        takeID: take.id, deviceID: segment.deviceId, number: segment.number, path: path,
                        at: clock.unixMilliseconds())
                } catch {
                    failures.append(
                        "segment \(segment.number) of \(segment.deviceId) was copied to \(path) but the index could not record it: \(error)")
                    continue
                }
                if from.hasPrefix("node ") {
                    links.send(to: nodeID, takeID: take.id, deviceID: segment.deviceId, .collected(.with { $0.number = UInt32(segment.number) }))
                } else {
                    logger.notice("a segment was collected from its storage destination", metadata: ["take.id": "\(take.id)", "from": "\(from)"])
                }
            case let .failure(failure):
                if failure.description == nodeFailure {
                    missing.append("\(segment.deviceId) #\(segment.number)")
                } else {
                    failures.append(failure.description)
                }
            }
        }
        if !missing.isEmpty, let nodeFailure {
            failures.insert("\(nodeFailure) (segments \(missing.joined(separator: ", ")); none has a proved copy on a storage destination)", at: 0)
        }
        return failures
    }
}
