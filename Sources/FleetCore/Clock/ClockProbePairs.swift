/// Which probes an agent has in flight, and what each answer means. Probes go in pairs: the
/// first message after a quiet spell finds every thread and CPU on its way asleep and pays
/// for waking them, while its answer, sent microseconds later, finds them awake. A lone
/// probe's outbound trip is therefore slower at its very floor (50–200 µs on this machine's
/// loopback), and no exchange of timestamps can tell an asymmetric floor from an offset. So
/// the first probe of a pair only wakes the path; the second, sent the moment the first is
/// answered, travels both ways on an awake path and is the one measured.
///
/// Pure: the caller stamps and sends, and hands in the times.
public struct ClockProbePairs: Sendable {
    public enum Purpose: Sendable, Equatable { case wake, measure }

    /// What an answer is good for.
    public enum Answer: Sendable, Equatable {
        /// A wake probe came back: send the measured probe now.
        case sendMeasuredProbe
        /// The measured probe came back: its four timestamps.
        case measured(ClockProbe)
    }

    /// Answers later than this are not coming, or are useless if they do.
    public static let answerTimeout: UInt64 = 2_000_000_000

    private var sequence: UInt64 = 0
    private var inFlight: [UInt64: (sent: UInt64, purpose: Purpose)] = [:]

    public init() {}

    public var probesInFlight: Int { inFlight.count }

    /// The sequence number for the next probe; the caller then stamps t1 and sends it, and
    /// reports it with `sent(_:at:purpose:)` once the send succeeded.
    public mutating func nextSequence() -> UInt64 {
        sequence += 1
        return sequence
    }

    public mutating func sent(_ sequence: UInt64, at sent: UInt64, purpose: Purpose) {
        inFlight[sequence] = (sent, purpose)
    }

    /// Forgets probes whose answers are overdue at `now` (agent clock).
    public mutating func expire(now: UInt64) {
        inFlight = inFlight.filter { now < $0.value.sent || now - $0.value.sent < Self.answerTimeout }
    }

    /// An answer to `sequence` that echoes `echoedSent` as t1, stamped t2/t3 by the coordinator
    /// and received at `received`. nil if it matches no probe in flight.
    public mutating func answer(
        sequence: UInt64, echoedSent: UInt64, serverReceived: UInt64, serverSent: UInt64,
        received: UInt64
    ) -> Answer? {
        guard let probe = inFlight[sequence], probe.sent == echoedSent else { return nil }
        inFlight[sequence] = nil
        switch probe.purpose {
        case .wake: return .sendMeasuredProbe
        case .measure: return .measured(ClockProbe(sent: probe.sent, serverReceived: serverReceived, serverSent: serverSent, received: received))
        }
    }
}
