/// The agent's side of the control dialog as a pure state machine: when to (re)connect,
/// send HELLO, heartbeat and report status, and when to give the coordinator up for gone.
/// The shell (the agent's control channel) feeds it time and messages and performs the
/// directives it returns. See proto-docs/registration.md.
public struct AgentLink: Sendable {
    public enum Directive: Equatable, Sendable {
        /// Close the control socket and open a new one.
        case reconnect
        case sendHello
        case sendHeartbeat(sequence: UInt64)
        case sendStatus
        /// The status, standing for the heartbeat of this sequence (a coordinator that said
        /// `status_heartbeats` answers it with the heartbeat's ack): one message, not two.
        case sendStatusAsHeartbeat(sequence: UInt64)
        /// WELCOME arrived: start or resume streaming to this ingest port.
        case registered(frameIngestPort: UInt32)
        /// The coordinator went silent past its liveness: stop trusting the link.
        case lostCoordinator
    }

    public enum Inbound: Equatable, Sendable {
        case welcome(frameIngestPort: UInt32, heartbeatIntervalNanoseconds: UInt64, liveness: UInt64, statusHeartbeats: Bool = false)
        case refused(reason: String)
        case reregister
        case other
    }

    public enum Phase: Equatable, Sendable {
        case registering
        case registered
    }

    public private(set) var phase: Phase = .registering
    public private(set) var lastRefusal: String?
    private var heartbeatInterval: UInt64
    private var liveness: UInt64
    private var backoff: ReconnectBackoff
    private var lastHeard: UInt64
    private var nextHelloAt: UInt64
    private var nextHeartbeatAt: UInt64 = .max
    private var nextStatusAt: UInt64 = .max
    private var heartbeatSequence: UInt64 = 0
    /// The coordinator counts a status as the heartbeat due with it (its WELCOME said so).
    private var statusHeartbeats = false
    private var patience = AgentLink.registrationPatience
    /// A HELLO the socket took and the coordinator has not answered: at most one at a time.
    /// A WELCOME can take a loaded coordinator seconds, and a repeat only waits for the same
    /// answer; but a HELLO can also be lost with its connection (a coordinator restarting),
    /// so an unanswered one is said again after `helloAnswerWait`, doubling up to the
    /// patience, after which the socket itself is replaced.
    public private(set) var helloOutstanding = false
    private var helloRepeatAt: UInt64 = .max
    private var helloAnswerWait = AgentLink.firstHelloAnswerWait
    public static let firstHelloAnswerWait: UInt64 = 2_000_000_000
    private let statusInterval: UInt64

    public init(
        now: UInt64, heartbeatIntervalNanoseconds: UInt64 = 1_000_000_000, liveness: UInt64 = 3,
        statusIntervalNanoseconds: UInt64 = 1_000_000_000, backoff: ReconnectBackoff = ReconnectBackoff()
    ) {
        self.heartbeatInterval = heartbeatIntervalNanoseconds
        self.liveness = liveness
        self.statusInterval = statusIntervalNanoseconds
        self.backoff = backoff
        self.lastHeard = now
        self.nextHelloAt = now
    }

    /// How long a fresh socket gets to connect (TCP and the CURVE handshake) before HELLO.
    public static let freshSocketGrace: UInt64 = 250_000_000
    /// How long a HELLO may first go unanswered before the socket is replaced; each
    /// replacement doubles it up to `maximumRegistrationPatience`, and a WELCOME resets it.
    public static let registrationPatience: UInt64 = 10_000_000_000
    public static let maximumRegistrationPatience: UInt64 = 80_000_000_000

    public mutating func tick(now: UInt64) -> [Directive] {
        switch phase {
        case .registering:
            // A HELLO unanswered for the whole liveness window means the socket may be
            // stuck on a dead peer: start over on a fresh one, and say HELLO once it has had
            // time to connect (a fresh socket drops what it cannot send yet, and once the
            // back-off exceeds the window every HELLO would otherwise meet a fresh socket).
            // A first registration may take the coordinator seconds (a camera with hundreds of
            // formats on a slow host): abandoning the socket before its WELCOME arrives would
            // start the same slow registration again, for ever. Hence the growing patience.
            if now - lastHeard > max(heartbeatInterval * liveness, patience) {
                lastHeard = now
                patience = min(patience * 2, Self.maximumRegistrationPatience)
                nextHelloAt = now + Self.freshSocketGrace
                helloOutstanding = false
                return [.reconnect]
            }
            if helloOutstanding {
                guard now >= helloRepeatAt else { return [] }
                helloOutstanding = false
                helloAnswerWait = min(helloAnswerWait * 2, patience)
                return [.sendHello]
            }
            guard now >= nextHelloAt else { return [] }
            nextHelloAt = now + backoff.nextDelay()
            return [.sendHello]
        case .registered:
            if now > lastHeard, now - lastHeard > heartbeatInterval * liveness {
                phase = .registering
                lastHeard = now
                nextHelloAt = now + backoff.nextDelay()
                helloOutstanding = false
                return [.lostCoordinator, .reconnect]
            }
            var directives: [Directive] = []
            if now >= nextHeartbeatAt {
                heartbeatSequence += 1
                nextHeartbeatAt = now + heartbeatInterval
                if statusHeartbeats {
                    // The status goes on the heartbeat's beat and stands for it.
                    nextStatusAt = now + statusInterval
                    return [.sendStatusAsHeartbeat(sequence: heartbeatSequence)]
                }
                directives.append(.sendHeartbeat(sequence: heartbeatSequence))
            }
            if now >= nextStatusAt {
                nextStatusAt = now + statusInterval
                directives.append(.sendStatus)
            }
            return directives
        }
    }

    /// Whether the socket took the HELLO of the last `sendHello`. One it could not take (no
    /// connection yet: the socket is ZMQ_IMMEDIATE) is tried again after the back-off.
    public mutating func helloSent(accepted: Bool, now: UInt64) {
        helloOutstanding = accepted
        helloRepeatAt = accepted ? now + helloAnswerWait : .max
    }

    public mutating func received(_ message: Inbound, now: UInt64) -> [Directive] {
        lastHeard = now
        switch message {
        case let .welcome(port, interval, liveness, statusHeartbeats):
            self.statusHeartbeats = statusHeartbeats
            helloOutstanding = false
            helloAnswerWait = Self.firstHelloAnswerWait
            heartbeatInterval = interval
            self.liveness = liveness
            backoff.reset()
            patience = Self.registrationPatience
            phase = .registered
            lastRefusal = nil
            nextHeartbeatAt = now + heartbeatInterval
            nextStatusAt = now
            return [.registered(frameIngestPort: port)]
        case let .refused(reason):
            // Keep asking, slowly: the operator may upgrade the coordinator.
            lastRefusal = reason
            phase = .registering
            helloOutstanding = false
            nextHelloAt = now + backoff.nextDelay()
            return []
        case .reregister:
            // After a coordinator restart, every message queued before it may draw one: the
            // first sends HELLO, the rest wait for its answer.
            phase = .registering
            guard !helloOutstanding else { return [] }
            nextHelloAt = now
            return [.sendHello]
        case .other:
            return []
        }
    }
}
