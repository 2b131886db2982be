import FleetCore
import FleetProtocol
import FleetStore

extension NodeClockRecord {
    /// What an agent reported, as stored; nil when it reported no clock state.
    init?(wire: Capfleet_V1_ClockState, nodeID: String, at now: UnixMilliseconds) {
        guard let sync = wire.sync.name else { return nil }
        self.init(
            nodeId: nodeID, sync: sync, offsetNs: wire.offsetNs, wallClockOffsetNs: wire.wallClockOffsetNs,
            driftPpm: wire.driftPpm, uncertaintyNs: Int64(clamping: wire.uncertaintyNs),
            roundTripNs: Int64(clamping: wire.roundTripNs), coordinatorId: wire.coordinatorID, reportedAt: now)
    }

    var wire: Capfleet_V1_ClockState {
        .with {
            $0.sync =
                switch sync {
                case "locked": .locked
                case "synchronising": .synchronising
                default: .unsynchronised
                }
            $0.offsetNs = offsetNs
            $0.wallClockOffsetNs = wallClockOffsetNs
            $0.driftPpm = driftPpm
            $0.uncertaintyNs = UInt64(max(uncertaintyNs, 0))
            $0.roundTripNs = UInt64(max(roundTripNs, 0))
            $0.coordinatorID = coordinatorId
            $0.reportedUnixMs = reportedAt
        }
    }
}
