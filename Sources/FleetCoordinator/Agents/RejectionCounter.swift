import FleetCore
import FleetStore
import Logging
import Synchronization

/// Counts malformed input on every coordinator endpoint and logs it at most once per
/// peer and reason per minute. Shared by the socket threads; never throws, never blocks long.
public final class RejectionCounter: Sendable {
    private let ledger = Mutex(RejectionLedger())
    private let logger: Logger
    /// The refusals logged, for the part that publishes and audits them (one stream: the seam).
    /// At most one a minute per endpoint, reason and peer, so a bounded buffer loses none
    /// but a flood's.
    let logged: AsyncStream<LoggedRejection>
    private let loggedSink: AsyncStream<LoggedRejection>.Continuation

    public init(logger: Logger) {
        self.logger = logger
        (logged, loggedSink) = AsyncStream.makeStream(of: LoggedRejection.self, bufferingPolicy: .bufferingNewest(1_000))
    }

    func reject(endpoint: String, reason: InputRejection, peer: String, detail: String = "") {
        let shouldLog = ledger.withLock { $0.record(endpoint: endpoint, reason: reason.rawValue, peer: peer, at: MonotonicTime.now()) }
        guard shouldLog else { return }
        logger.warning(
            "rejected input",
            metadata: [
                "endpoint": "\(endpoint)", "reason": "\(reason.rawValue)", "peer": "\(peer)", "detail": "\(detail)",
            ])
        loggedSink.yield(LoggedRejection(endpoint: endpoint, reason: reason, peer: peer, detail: detail))
    }

    /// No more refusals are told (the coordinator is stopping).
    func finishTelling() { loggedSink.finish() }

    /// Counting goes on from the totals a previous run stored.
    public func resume(from stored: [RejectionTotal]) {
        ledger.withLock { $0.resume(from: stored.map { ($0.endpoint, $0.reason, $0.count) }) }
    }

    public var counts: [(endpoint: String, reason: String, count: UInt64)] {
        ledger.withLock { $0.counts }.sorted { $0.key < $1.key }.map { ($0.key.endpoint, $0.key.reason, $0.value) }
    }
}

/// A refusal as the counter logged it.
struct LoggedRejection: Sendable {
    let endpoint: String
    let reason: InputRejection
    let peer: String
    let detail: String
}
