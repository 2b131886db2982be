import FleetCore
import FleetProtocol
import FleetStorage
import FleetSystem
import Logging
import Synchronization

/// Copies segments of parts held here straight to a storage destination (record.proto,
/// "Offload"), `transfers` at a time, each on a thread of its own (a copy blocks on rclone for
/// as long as its bytes take; two at once keep the link busy while the other is proved by
/// reading it back). Together they stay within the collect rate, so capture and the takes
/// being written keep the disk and the link. An order for a copy queued or under way is that
/// copy; the answer goes back through `answer`, once: the coordinator asks again if it is lost.
final class AgentOffloader: Sendable {
    struct Order: Sendable {
        let part: TakeDeviceKey
        let request: Capfleet_V1_OffloadSegment
    }

    private struct OrderKey: Hashable {
        let part: TakeDeviceKey
        let number: UInt32
        let destination: String
    }

    /// Copies at once on this host (rclone copy's own default is four; two keep one proving
    /// while one sends without a second host's worth of processes on a small camera host).
    static let transfers = 2

    /// What the workers and the link's thread share: the copies queued or under way, each
    /// worker's share of them, whether the host is stopping, and rclone for each destination
    /// (its passwords obscured once, what it keeps learned once).
    private final class Shared: Sendable {
        let pending = Mutex<Set<OrderKey>>([])
        let load = Mutex<[Int]>(Array(repeating: 0, count: AgentOffloader.transfers))
        let stopping = Atomic<Bool>(false)
        let destinations = Mutex<[String: (wire: Capfleet_V1_StorageDestination, rclone: Rclone)]>([:])
        var isStopping: Bool { stopping.load(ordering: .relaxed) }

        func rclone(for wire: Capfleet_V1_StorageDestination) throws -> Rclone {
            if let known = destinations.withLock({ $0[wire.name] }), known.wire == wire { return known.rclone }
            let destination = try StorageDestination(
                name: wire.name, backend: wire.backend, options: wire.options, secrets: wire.secrets, root: wire.root)
            let made = try Rclone(destination: destination)
            destinations.withLock { $0[wire.name] = (wire, made) }
            return made
        }
    }

    private let workers: [OwnedWorker<Order>]
    private let shared = Shared()

    init(
        store: AgentTakeStore, consentAllows: @escaping @Sendable (String) -> Bool,
        answer: @escaping @Sendable (TakeDeviceKey, Capfleet_V1_RecordUp.OneOf_Body) -> Void, logger: Logger
    ) {
        let shared = self.shared
        workers = (0..<Self.transfers).map { slot in
            OwnedWorker(
                name: "cf-offload\(slot + 1)",
                handle: { order in
                    let key = OrderKey(part: order.part, number: order.request.number, destination: order.request.destination.name)
                    defer {
                        _ = shared.pending.withLock { $0.remove(key) }
                        shared.load.withLock { $0[slot] -= 1 }
                    }
                    // Not answered while stopping: the coordinator orders it again once this agent is back.
                    if shared.isStopping { return }
                    let result = Self.offload(
                        order, store: store, shared: shared, consentAllows: consentAllows,
                        progress: { sent in
                            answer(
                                order.part,
                                .offloading(
                                    .with {
                                        $0.number = order.request.number
                                        $0.destination = order.request.destination.name
                                        $0.sentBytes = sent
                                        $0.sizeBytes = order.request.sizeBytes
                                    }))
                        })
                    if shared.isStopping { return }
                    if result.verified {
                        logger.info(
                            "a segment is on its storage destination",
                            metadata: [
                                "take.id": "\(order.part.takeID)", "device.id": "\(order.part.deviceID)", "segment": "\(result.number)",
                                "destination": "\(result.destination)", "sent.bytes": "\(result.sentBytes)", "proof": "\(result.proof)",
                            ])
                    } else {
                        logger.warning(
                            "a segment could not be offloaded",
                            metadata: [
                                "take.id": "\(order.part.takeID)", "device.id": "\(order.part.deviceID)", "segment": "\(result.number)",
                                "destination": "\(result.destination)", "error": "\(result.error)",
                            ])
                    }
                    answer(order.part, .offloaded(result))
                })
        }
    }

    /// Queues the copy unless it is queued or under way already.
    func order(_ request: Capfleet_V1_OffloadSegment, of part: TakeDeviceKey) {
        let key = OrderKey(part: part, number: request.number, destination: request.destination.name)
        guard shared.pending.withLock({ $0.insert(key).inserted }) else { return }
        // To the worker with the fewest copies in hand.
        let slot = shared.load.withLock { load in
            let least = load.indices.min { load[$0] < load[$1] } ?? 0
            load[least] += 1
            return least
        }
        workers[slot].post(Order(part: part, request: request))
    }

    /// Ends the copies under way (rclone is stopped) and drops the queued ones: unanswered,
    /// they are ordered again when this agent is back.
    func stop() {
        shared.stopping.store(true, ordering: .relaxed)
        for worker in workers { worker.requestStop() }
        for worker in workers { worker.stopBlocking() }
    }

    /// On the worker's thread: one copy, proved.
    private static func offload(
        _ order: Order, store: AgentTakeStore, shared: Shared, consentAllows: @Sendable (String) -> Bool, progress: @escaping (UInt64) -> Void
    ) -> Capfleet_V1_SegmentOffloaded {
        let request = order.request
        var result = Capfleet_V1_SegmentOffloaded()
        result.number = request.number
        result.destination = request.destination.name
        result.objectPath = request.objectPath
        guard consentAllows(order.part.deviceID) else {
            result.heldBack = true
            result.error = "device \(order.part.deviceID)'s consent is not granted now: its frames do not leave the host"
            return result
        }
        guard
            let segment = store.part(order.part)?.current.segments.first(where: { $0.number == Int(request.number) && $0.state != .open })
        else {
            result.error = "this agent holds no finished segment \(request.number) of \(order.part.deviceID) in \(order.part.takeID)"
            return result
        }
        var rclone: Rclone
        do {
            rclone = try shared.rclone(for: request.destination)
        } catch {
            result.error = "\(error)"
            return result
        }
        rclone.stopRequested = { shared.isStopping }
        // The copies at once share the host's rate.
        let rate = UInt64(max(store.settings.collectBytesPerSecond, 0)) / UInt64(Self.transfers)
        let uploader = SegmentUploader(rclone: rclone, bytesPerSecond: rate)
        var lastProgress = MonotonicTime.now()
        let report = uploader.offload(
            file: segment.path, sizeBytes: request.sizeBytes, sha256: request.sha256, to: request.objectPath,
            progress: { sent in
                let now = MonotonicTime.now()
                guard now &- lastProgress >= 2_000_000_000 else { return }
                lastProgress = now
                progress(sent)
            })
        switch report.outcome {
        case let .verified(sentBytes, proof):
            result.verified = true
            result.sentBytes = sentBytes
            result.proof = proof.rawValue
        case let .failed(reason, full):
            result.error = reason
            result.destinationFull = full
        }
        result.replacedCorruptCopy = report.replacedCorruptCopy ?? ""
        return result
    }
}
