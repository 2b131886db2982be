import FleetCore
import FleetProtocol
import FleetStorage
import FleetSystem
import Logging
import Synchronization

/// Copies segments of parts held here straight to a storage destination (record.proto,
/// "Offload"), one at a time on a thread of its own (each copy blocks on rclone for as long as
/// its bytes take at the collect rate, so capture and the takes being written keep the disk
/// and the link). An order for a copy queued or under way is that copy; the answer goes back
/// through `answer`, once: the coordinator asks again if it is lost.
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

    /// What the worker and the link's thread share: the copies queued or under way, and
    /// whether the host is stopping.
    private final class Shared: Sendable {
        let pending = Mutex<Set<OrderKey>>([])
        let stopping = Atomic<Bool>(false)
        var isStopping: Bool { stopping.load(ordering: .relaxed) }
    }

    private let worker: OwnedWorker<Order>
    private let shared = Shared()

    init(
        store: AgentTakeStore, consentAllows: @escaping @Sendable (String) -> Bool,
        answer: @escaping @Sendable (TakeDeviceKey, Capfleet_V1_RecordUp.OneOf_Body) -> Void, logger: Logger
    ) {
        let shared = self.shared
        worker = OwnedWorker(
            name: "cf-offload",
            handle: { order in
                let key = OrderKey(part: order.part, number: order.request.number, destination: order.request.destination.name)
                defer { _ = shared.pending.withLock { $0.remove(key) } }
                // Not answered while stopping: the coordinator orders it again once this agent is back.
                if shared.isStopping { return }
                let result = Self.offload(
                    order, store: store, consentAllows: consentAllows, stopping: { shared.isStopping },
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

    /// Queues the copy unless it is queued or under way already.
    func order(_ request: Capfleet_V1_OffloadSegment, of part: TakeDeviceKey) {
        let key = OrderKey(part: part, number: request.number, destination: request.destination.name)
        guard shared.pending.withLock({ $0.insert(key).inserted }) else { return }
        worker.post(Order(part: part, request: request))
    }

    /// Ends a copy under way (rclone is stopped) and drops the queued ones: unanswered, they
    /// are ordered again when this agent is back.
    func stop() {
        shared.stopping.store(true, ordering: .relaxed)
        worker.stopBlocking()
    }

    /// On the worker's thread: one copy, proved.
    private static func offload(
        _ order: Order, store: AgentTakeStore, consentAllows: @Sendable (String) -> Bool, stopping: @escaping @Sendable () -> Bool,
        progress: @escaping (UInt64) -> Void
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
        let wire = request.destination
        var rclone: Rclone
        do {
            let destination = try StorageDestination(
                name: wire.name, backend: wire.backend, options: wire.options, secrets: wire.secrets, root: wire.root)
            rclone = try Rclone(destination: destination)
        } catch {
            result.error = "\(error)"
            return result
        }
        rclone.stopRequested = stopping
        let uploader = SegmentUploader(rclone: rclone, bytesPerSecond: UInt64(max(store.settings.collectBytesPerSecond, 0)))
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
