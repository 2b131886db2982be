import FleetCore
import Testing

@Suite struct AgentRunDropsTests {
    @Test func reportsOfOneRun_keepTheLargestCountsSeen() {
        var drops = AgentRunDrops()
        _ = drops.registered(agentInstance: "a")
        drops.report(DropTally(late: 5))
        drops.report(DropTally(late: 3, outOfBuffers: 1))  // an older status arriving after a newer frame
        #expect(drops.total == DropTally(late: 5, outOfBuffers: 1))
    }

    @Test func aRestartedAgent_startsOver_andItsNewDropsStillCount() {
        var drops = AgentRunDrops()
        _ = drops.registered(agentInstance: "a")
        drops.report(DropTally(late: 40, discontinuity: 2))
        let restarted = drops.registered(agentInstance: "b")
        #expect(restarted)
        // The new process counts from 0: 3 late frames are 3 more, not hidden below 40.
        drops.report(DropTally(late: 3))
        #expect(drops.total == DropTally(late: 43, discontinuity: 2))
        #expect(drops.restarts == 1)
    }

    @Test func theSameProcessRegisteringAgain_isNoRestart() {
        var drops = AgentRunDrops()
        _ = drops.registered(agentInstance: "a")
        drops.report(DropTally(late: 7))
        let again = drops.registered(agentInstance: "a")
        #expect(!again)
        drops.report(DropTally(late: 8))
        #expect(drops.total == DropTally(late: 8))
        #expect(drops.restarts == 0)
    }

    @Test func agentsThatNameNoProcess_areNeverTakenForARestart() {
        var drops = AgentRunDrops()
        let first = drops.registered(agentInstance: "")
        drops.report(DropTally(outOfBuffers: 4))
        let second = drops.registered(agentInstance: "")
        #expect(!first && !second)
        #expect(drops.total == DropTally(outOfBuffers: 4))
    }
}
