import FleetProtocol
import Testing

@testable import FleetCore

@Suite struct ClockSyncWatchTests {
    func report(_ sync: Capfleet_V1_ClockState.Sync, uncertainty: UInt64 = 212_400) -> Capfleet_V1_ClockState {
        .with {
            $0.sync = sync
            $0.uncertaintyNs = uncertainty
        }
    }

    @Test func aNodeNeverHeardOf_raisesNothingForItsFirstReport_thenLockingIsAChange() {
        var watch = ClockSyncWatch()
        watch.registered("node-a", stored: nil)
        #expect(watch.reported(report(.synchronising), nodeID: "node-a") == nil)
        #expect(watch.reported(report(.synchronising), nodeID: "node-a") == nil, "once a second, the same state: nothing")
        let locked = watch.reported(report(.locked, uncertainty: 1_200_000), nodeID: "node-a")
        #expect(locked == .init(nodeID: "node-a", from: .synchronising, to: .locked, message: "clock locked (±1.20 ms)"))
        #expect(watch.reported(report(.locked), nodeID: "node-a") == nil)
    }

    @Test func losingLock_saysWhatTheStateMeans() {
        var watch = ClockSyncWatch()
        _ = watch.reported(report(.locked), nodeID: "node-a")
        let stale = watch.reported(report(.synchronising, uncertainty: 4_100_000), nodeID: "node-a")
        #expect(stale?.message == "clock lost lock: synchronising (±4.10 ms); no usable probe for 10 s, or too few behind the estimate")
        _ = watch.reported(report(.locked), nodeID: "node-a")
        let over = watch.reported(report(.unsynchronised), nodeID: "node-a")
        #expect(over?.from == .locked && over?.to == .unsynchronised)
        #expect(over?.message == "clock lost lock: unsynchronised; the estimate started over")
        #expect(watch.reported(report(.synchronising, uncertainty: 850), nodeID: "node-a")?.message == "clock synchronising (±850 ns)")
    }

    /// After a restart the first report is compared with the state stored before it.
    @Test func theFirstReportAfterRegistering_isComparedWithTheStoredState() {
        var watch = ClockSyncWatch()
        watch.registered("steady", stored: .locked)
        #expect(watch.reported(report(.locked), nodeID: "steady") == nil, "locked before, locked now: nothing happened")
        watch.registered("restarted", stored: .locked)
        let lost = watch.reported(report(.synchronising, uncertainty: 40_000), nodeID: "restarted")
        #expect(lost?.from == .locked)
        #expect(lost?.message == "clock lost lock: synchronising (±40.0 µs) since the node registered again (agent or coordinator restart)")
        #expect(watch.reported(report(.locked), nodeID: "restarted")?.message == "clock locked (±212.4 µs)")
    }

    /// What this coordinator heard itself is newer than what it stored every five seconds.
    @Test func reRegistering_keepsTheStateHeardLast() {
        var watch = ClockSyncWatch()
        _ = watch.reported(report(.locked), nodeID: "node-a")
        _ = watch.reported(report(.synchronising), nodeID: "node-a")
        watch.registered("node-a", stored: .locked)
        #expect(watch.reported(report(.synchronising), nodeID: "node-a") == nil)
    }

    @Test func unspecifiedReports_andForgottenNodes_raiseNothing() {
        var watch = ClockSyncWatch()
        _ = watch.reported(report(.locked), nodeID: "node-a")
        #expect(watch.reported(report(.unspecified), nodeID: "node-a") == nil)
        #expect(watch.reported(report(.locked), nodeID: "node-a") == nil, "an unspecified report changes nothing known")
        watch.forget("node-a")
        #expect(watch.reported(report(.synchronising), nodeID: "node-a") == nil)
    }

    @Test func errorBounds_readAsPeopleWriteThem() {
        #expect(ClockSyncWatch.duration(850) == "850 ns")
        #expect(ClockSyncWatch.duration(212_449) == "212.4 µs")
        #expect(ClockSyncWatch.duration(1_205_000) == "1.21 ms")
        #expect(ClockSyncWatch.duration(40_000) == "40.0 µs")
        #expect(ClockSyncWatch.duration(3_200_000_000) == "3.200 s")
        #expect(ClockSyncWatch.duration(3_000_050_000) == "3.000 s")
    }
}
