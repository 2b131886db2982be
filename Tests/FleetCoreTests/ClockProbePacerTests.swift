import FleetCore
import Testing

@Suite struct ClockProbePacerTests {
    let second: UInt64 = 1_000_000_000

    func peer(_ number: Int) -> [UInt8] { [0, UInt8(number >> 8), UInt8(number & 0xFF)] }

    @Test func aSmallFleet_keepsTheFastestPace_andALargeOneSpreadsTheBudget() {
        var pacer = ClockProbePacer(budget: 400)
        for agent in 0..<10 { _ = pacer.heard(from: peer(agent), at: second) }
        #expect(pacer.interval == ClockProbePacer.fastest, "10 agents at 10 pairs a second are 200 round trips: within 400")
        for agent in 10..<200 { _ = pacer.heard(from: peer(agent), at: second) }
        // 200 agents, 2 round trips a pair, 400 a second: one pair a second each.
        #expect(pacer.heard(from: peer(0), at: second + 1) == second)
        for agent in 200..<1000 { _ = pacer.heard(from: peer(agent), at: 2 * second) }
        #expect(pacer.interval == ClockProbePacer.slowest, "never slower than four probes within an estimate's staleness")
    }

    @Test func agentsNotHeardFor10Seconds_nolongerCount() {
        var pacer = ClockProbePacer(budget: 400)
        for agent in 0..<200 { _ = pacer.heard(from: peer(agent), at: second) }
        #expect(pacer.agents == 200)
        // Only agent 0 probes on; the others went away (or reconnected under new ids).
        for tick in 2...12 { _ = pacer.heard(from: peer(0), at: UInt64(tick) * second) }
        #expect(pacer.agents == 1 && pacer.interval == ClockProbePacer.fastest)
    }
}
