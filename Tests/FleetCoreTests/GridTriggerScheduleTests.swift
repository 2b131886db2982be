import FleetCore
import Testing

/// When a triggered camera's next trigger is due, on the fleet's grid and on the host's clock.
@Suite struct GridTriggerScheduleTests {
    /// 25 fps from a whole second of fleet time; the host's monotonic clock 7 s behind fleet time.
    let grid = FrameGrid(origin: 1_000_000_000_000, interval: 40_000_000)
    let offset: UInt64 = 7_000_000_000

    @Test func theNextSlotIsTheFirstOnTheGridAtLeastTheLeadAhead_onTheHostsClock() {
        let schedule = GridTriggerSchedule(grid: grid, lead: 2_000_000)
        // 10 ms into a slot: the next one is 30 ms away.
        let now = grid.origin + 5 * grid.interval + 10_000_000
        let slot = schedule.nextSlot(nowMonotonic: now - offset, nowFleet: now)
        #expect(slot.fleet == grid.origin + 6 * grid.interval)
        #expect(slot.monotonic == slot.fleet - offset)
        // 39 ms in: the next slot is 1 ms away, closer than the lead, so the one after.
        let late = grid.origin + 5 * grid.interval + 39_000_000
        #expect(schedule.nextSlot(nowMonotonic: late - offset, nowFleet: late).fleet == grid.origin + 7 * grid.interval)
        // Exactly the lead before a slot still makes it.
        let edge = grid.origin + 6 * grid.interval - 2_000_000
        #expect(schedule.nextSlot(nowMonotonic: edge - offset, nowFleet: edge).fleet == grid.origin + 6 * grid.interval)
    }

    @Test func beforeTheOrigin_theGridRunsOnBackwards() {
        let schedule = GridTriggerSchedule(grid: grid, lead: 0)
        let now = grid.origin - 3 * grid.interval - 15_000_000
        let slot = schedule.nextSlot(nowMonotonic: now - offset, nowFleet: now)
        #expect(slot.fleet == grid.origin - 3 * grid.interval)
        #expect(grid.phase(of: slot.fleet) == 0)
        // Just before the origin, the origin itself.
        #expect(schedule.nextSlot(nowMonotonic: 0, nowFleet: grid.origin - 1).fleet == grid.origin)
    }

    @Test func aTriggerLaterThanAQuarterOfAnIntervalIsMissed_notFired() {
        let schedule = GridTriggerSchedule(grid: grid)
        #expect(schedule.giveUpAfter == 10_000_000)
        #expect(schedule.verdict(nowMonotonic: 500, dueMonotonic: 1_000) == .fire(lateness: 0), "early (a spin ends at the instant): none")
        #expect(schedule.verdict(nowMonotonic: 1_000 + 45_000, dueMonotonic: 1_000) == .fire(lateness: 45_000))
        #expect(schedule.verdict(nowMonotonic: 1_000 + 10_000_000, dueMonotonic: 1_000) == .fire(lateness: 10_000_000))
        #expect(schedule.verdict(nowMonotonic: 1_000 + 10_000_001, dueMonotonic: 1_000) == .missed(lateness: 10_000_001))
    }

    @Test func aScheduledActionLeavesAheadOfItsSlot_andIsNotSentWithLessThanAMillisecondToGo() {
        let schedule = GridTriggerSchedule(grid: grid)
        let due: UInt64 = 50_000_000
        let lead: UInt64 = 10_000_000
        // Lateness counts from the planned departure, 10 ms before the slot.
        #expect(schedule.actionVerdict(nowMonotonic: 39_000_000, dueMonotonic: due, lead: lead) == .fire(lateness: 0))
        #expect(schedule.actionVerdict(nowMonotonic: 40_250_000, dueMonotonic: due, lead: lead) == .fire(lateness: 250_000))
        // It carries the slot's time: late as it is, it still reaches the camera before it.
        #expect(schedule.actionVerdict(nowMonotonic: 49_000_000, dueMonotonic: due, lead: lead) == .fire(lateness: 9_000_000))
        #expect(schedule.actionVerdict(nowMonotonic: 49_000_001, dueMonotonic: due, lead: lead) == .missed(lateness: 9_000_001))
        #expect(schedule.actionVerdict(nowMonotonic: 60_000_000, dueMonotonic: due, lead: lead) == .missed(lateness: 20_000_000))
    }
}
