import FleetCore
import FleetStore
import Logging

/// Tells what the rejection counter logged: an event on telemetry for every refusal, and an
/// audit entry for an access denial (a peer refused at the door rather than a malformed
/// message; `forbidden` is a known operator's request, audited by the operator door).
struct RejectionReporter: Sendable {
    let store: FleetDatabase
    let events: FleetEvents
    let clock: CoordinatorClock
    let logger: Logger

    /// Follows the counter's refusals until it stops telling them.
    func follow(_ logged: AsyncStream<LoggedRejection>) async {
        for await rejection in logged { await report(rejection) }
    }

    func report(_ rejection: LoggedRejection) async {
        let detail = rejection.detail
        events.emit(
            rejection.reason.isAccessDenial ? .accessDenied : .inputRejected,
            message: "\(rejection.endpoint): \(rejection.reason.rawValue) from \(rejection.peer)" + (detail.isEmpty ? "" : ": \(detail)"))
        guard rejection.reason.isAccessDenial, rejection.reason != .forbidden else { return }
        do {
            try await store.appendAudit(
                AuditEntry(
                    at: clock.unixMilliseconds(), actor: "peer:\(rejection.peer)", action: "access.denied",
                    target: rejection.endpoint, outcome: "refused", detail: "\(rejection.reason.rawValue): \(detail)"))
        } catch {
            // The refusal itself stands; only its audit entry is missing, which an admin must hear of.
            logger.error(
                "could not audit a refused connection",
                metadata: [
                    "endpoint": "\(rejection.endpoint)", "peer": "\(rejection.peer)", "reason": "\(rejection.reason.rawValue)",
                    "error": "\(error)",
                ])
        }
    }
}
