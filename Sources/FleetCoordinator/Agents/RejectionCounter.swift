import FleetCore
import FleetStore
import Logging
import Synchronization

/// Counts malformed input on every coordinator endpoint and logs it at most once per
/// peer and reason per minute. Shared by the socket threads; never throws, never blocks long.
public final class RejectionCounter: Sendable {
    private let ledger = Mutex(RejectionLedger())
    private let logger: Logger
    private let onLogged: @Sendable (_ endpoint: String, _ reason: InputRejection, _ peer: String, _ detail: String) -> Void

    public init(
        logger: Logger,
        onLogged: @escaping @Sendable (_ endpoint: String, _ reason: InputRejection, _ peer: String, _ detail: String) -> Void = { _, _, _, _ in }
    ) {
        self.logger = logger
        self.onLogged = onLogged
    }

    func reject(endpoint: String, reason: InputRejection, peer: String, detail: String = "") {
        let shouldLog = ledger.withLock { $0.record(endpoint: endpoint, reason: reason.rawValue, peer: peer, at: MonotonicTime.now()) }
        guard shouldLog else { return }
        logger.warning(
            "rejected input",
            metadata: [
                "endpoint": "\(endpoint)", "reason": "\(reason.rawValue)", "peer": "\(peer)", "detail": "\(detail)",
            ])
        onLogged(endpoint, reason, peer, detail)
    }

    /// Counting goes on from the totals a previous run stored.
    public func resume(from stored: [RejectionTotal]) {
        ledger.withLock { $0.resume(from: stored.map { ($0.endpoint, $0.reason, $0.count) }) }
    }

    public var counts: [(endpoint: String, reason: String, count: UInt64)] {
        ledger.withLock { $0.counts }.sorted { $0.key < $1.key }.map { ($0.key.endpoint, $0.key.reason, $0.value) }
    }
}
