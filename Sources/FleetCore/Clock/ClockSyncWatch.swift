import FleetProtocol

/// Notices when a node's clock sync state, as its agent reports it once a second, changes —
/// it locked, lost lock, started over — so that the coordinator says so once, when it happens
/// (proto-docs/telemetry.md, `event.clock_state_changed`). Values in, changes out; no I/O.
///
/// A node's first report after it registers is compared with what is known of it: the last state
/// this coordinator heard, else the one stored before (a restart of either side is an event only
/// if the state differs), else nothing — a node never heard of raises no event for its first report.
public struct ClockSyncWatch: Sendable {
    public struct Change: Sendable, Equatable {
        public var nodeID: String
        public var from: Capfleet_V1_ClockState.Sync
        public var to: Capfleet_V1_ClockState.Sync
        /// One line for people: `clock locked (±212.4 µs)`.
        public var message: String
    }

    private var known: [String: Capfleet_V1_ClockState.Sync] = [:]
    /// Nodes that registered and have not reported since.
    private var registering: Set<String> = []

    public init() {}

    /// The node registered; `stored` is its state as last stored, if ever. What this watch heard
    /// itself is newer and stays.
    public mutating func registered(_ nodeID: String, stored: Capfleet_V1_ClockState.Sync?) {
        registering.insert(nodeID)
        guard known[nodeID] == nil, let stored, stored.name != nil else { return }
        known[nodeID] = stored
    }

    /// The node's latest report; a change when its sync state differs from the one known before.
    public mutating func reported(_ clock: Capfleet_V1_ClockState, nodeID: String) -> Change? {
        guard clock.sync.name != nil else { return nil }
        let afterRegistering = registering.remove(nodeID) != nil
        let previous = known.updateValue(clock.sync, forKey: nodeID)
        guard let previous, previous != clock.sync else { return nil }
        return Change(
            nodeID: nodeID, from: previous, to: clock.sync,
            message: Self.message(from: previous, to: clock, afterRegistering: afterRegistering))
    }

    /// The node was forgotten or revoked: nothing is known of it any more.
    public mutating func forget(_ nodeID: String) {
        known[nodeID] = nil
        registering.remove(nodeID)
    }

    /// Why, as far as the states tell (clock.md, "The estimate"): locked needs enough recent
    /// probes behind the fit, so a running agent's clock falls back to synchronising when its newest
    /// usable probe grows stale or too few probes back the fit; an agent that restarted, or that
    /// follows a restarted coordinator (a new fleet time), starts over and registers again.
    static func message(from previous: Capfleet_V1_ClockState.Sync, to clock: Capfleet_V1_ClockState, afterRegistering: Bool) -> String {
        let state = clock.sync.name ?? "unknown"
        let now = clock.sync == .unsynchronised ? state : "\(state) (±\(duration(clock.uncertaintyNs)))"
        return switch (previous, clock.sync) {
        case (_, .locked): "clock locked (±\(duration(clock.uncertaintyNs)))"
        case (.locked, _) where afterRegistering: "clock lost lock: \(now) since the node registered again (agent or coordinator restart)"
        case (.locked, .synchronising): "clock lost lock: \(now); no usable probe for 10 s, or too few behind the estimate"
        case (.locked, _): "clock lost lock: \(now); the estimate started over"
        default: "clock \(now)"
        }
    }

    /// 850 ns, 12.3 µs, 4.56 ms, 3.200 s (without Foundation's formatting).
    static func duration(_ nanoseconds: UInt64) -> String {
        func fixed(_ unit: UInt64, digits: Int, _ name: String) -> String {
            let step = unit / [1, 10, 100, 1000][digits]
            let scaled = nanoseconds / step + (nanoseconds % step >= step / 2 ? 1 : 0)
            let whole = scaled / (unit / step), fraction = String(scaled % (unit / step))
            return "\(whole).\(String(repeating: "0", count: digits - fraction.count))\(fraction) \(name)"
        }
        return switch nanoseconds {
        case ..<1_000: "\(nanoseconds) ns"
        case ..<1_000_000: fixed(1_000, digits: 1, "µs")
        case ..<1_000_000_000: fixed(1_000_000, digits: 2, "ms")
        default: fixed(1_000_000_000, digits: 3, "s")
        }
    }
}
