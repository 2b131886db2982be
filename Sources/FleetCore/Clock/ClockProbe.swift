/// One NTP-style exchange between an agent and the coordinator, the fleet's time reference:
/// the agent sends at `sent` and hears back at `received` (its own monotonic clock, ns); the
/// coordinator took the probe in at `serverReceived` and answered at `serverSent` (fleet
/// time, ns). See proto-docs/clock.md.
public struct ClockProbe: Sendable, Equatable {
    public var sent: UInt64
    public var serverReceived: UInt64
    public var serverSent: UInt64
    public var received: UInt64

    public init(sent: UInt64, serverReceived: UInt64, serverSent: UInt64, received: UInt64) {
        self.sent = sent
        self.serverReceived = serverReceived
        self.serverSent = serverSent
        self.received = received
    }

    /// Round trip minus the coordinator's turnaround, ns. Negative or absurd means the
    /// timestamps are not to be trusted.
    public var delay: Int64 {
        Int64(bitPattern: received &- sent) &- Int64(bitPattern: serverSent &- serverReceived)
    }

    /// How far the agent's clock is ahead of fleet time (local − fleet), ns, assuming the two
    /// directions took equally long; wrong by at most half the delay if they did not.
    public var offset: Int64 {
        let outbound = Int64(bitPattern: sent &- serverReceived)  // local − fleet, early by the outbound trip
        let inbound = Int64(bitPattern: received &- serverSent)  // local − fleet, late by the inbound trip
        // Halved separately: the sum of two epoch-sized differences could overflow.
        return outbound / 2 + inbound / 2 + (outbound % 2 + inbound % 2) / 2
    }

    /// The agent's clock halfway through the exchange: where `offset` applies.
    public var localMidpoint: UInt64 { sent &+ (received &- sent) / 2 }

    /// Whether the four timestamps describe a possible exchange at all.
    public var isPlausible: Bool {
        received >= sent && serverSent >= serverReceived && delay >= 0
    }
}
