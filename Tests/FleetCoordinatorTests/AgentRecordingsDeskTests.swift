import FleetProtocol
import Testing

@testable import FleetCoordinator

/// The desk's two streams feed two daemon parts that stop one after the other: ending one
/// stream must leave the other open, or its part ends before its turn and the coordinator
/// stops with "a service has finished unexpectedly".
@Suite struct AgentRecordingsDeskTests {
    @Test func finishingStillNews_leavesTakeReportsFlowingUntilTheirOwnFinish() async {
        let desk = AgentRecordingsDesk()
        desk.finishStillNews()
        var stills = 0
        for await _ in desk.stillNews { stills += 1 }
        #expect(stills == 0, "still news ended at once")

        var segment = Capfleet_V1_AgentSegment()
        segment.number = 3
        desk.reported(AgentTakeReport(nodeID: "node-a", routingID: [1], takeID: "take-1", deviceID: "cam-1", body: .segment(segment)))
        desk.finishReports()
        var takes: [String] = []
        for await report in desk.reports { takes.append(report.takeID) }
        #expect(takes == ["take-1"], "a report after the still news ended still reached the director")
    }
}
