import FleetCore
import Testing

@Suite struct ConsentRelayTests {
    @Test func aPushWhoseTurnComesAfterALaterChange_isSkipped() {
        var relay = ConsentRelay()
        relay.recorded(1, of: "cam-1")
        relay.recorded(2, of: "cam-1")
        #expect(!relay.shouldPush(1, of: "cam-1"))
        #expect(relay.shouldPush(2, of: "cam-1"))
    }

    @Test func anOlderChangeReportedLate_neverOutranksTheNewest() {
        var relay = ConsentRelay()
        // The request of change 2 resumed first; change 1's request arrives after it.
        relay.recorded(2, of: "cam-1")
        relay.recorded(1, of: "cam-1")
        #expect(!relay.shouldPush(1, of: "cam-1"))
        #expect(relay.shouldPush(2, of: "cam-1"))
    }

    @Test func devicesTakeTurnsApart() {
        var relay = ConsentRelay()
        relay.recorded(5, of: "cam-1")
        relay.recorded(3, of: "cam-2")
        #expect(relay.shouldPush(3, of: "cam-2"))
        #expect(relay.shouldPush(7, of: "cam-3"))
    }
}
