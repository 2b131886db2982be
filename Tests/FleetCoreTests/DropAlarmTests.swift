import FleetCore
import Testing

@Suite struct DropAlarmTests {
    let second: UInt64 = 1_000_000_000

    @Test func firesOnceWhenTheShareCrossesTheThresholdThenRearmsWhenItSettles() {
        var alarm = DropAlarm(threshold: 0.05, windowNanoseconds: 10 * second)
        var frames: UInt64 = 0, drops: UInt64 = 0
        var fired: [Int] = []
        for tick in 0..<60 {
            // Ticks 10–19 lose 10 of 30 frames a second; otherwise nothing is lost.
            if (10..<20).contains(tick) { frames += 20; drops += 10 } else { frames += 30 }
            if alarm.observe(frames: frames, drops: drops, at: UInt64(tick) * second).fire { fired.append(tick) }
        }
        // The share over the window crosses 5 % within the spell's first two seconds.
        #expect(fired.count == 1 && (10...11).contains(fired[0]), "one alert for one bad spell: \(fired)")

        // A second bad spell after the window has cleared fires again.
        for tick in 60..<70 {
            frames += 20; drops += 10
            if alarm.observe(frames: frames, drops: drops, at: UInt64(tick) * second).fire { fired.append(tick) }
        }
        #expect(fired.count == 2 && (60...61).contains(fired[1]), "\(fired)")
    }

    @Test func aFewDropsAmongManyFramesStayBelowTheThreshold() {
        var alarm = DropAlarm(threshold: 0.05, windowNanoseconds: 10 * second)
        var frames: UInt64 = 0, drops: UInt64 = 0
        for tick in 0..<30 {
            frames += 30
            if tick % 5 == 0 { drops += 1 }  // well under 1 %
            let result = alarm.observe(frames: frames, drops: drops, at: UInt64(tick) * second)
            #expect(!result.fire)
            #expect(result.share < 0.05)
        }
    }

    @Test func aRestartedCounterStartsTheWindowAgain() {
        var alarm = DropAlarm(threshold: 0.5, windowNanoseconds: 10 * second)
        _ = alarm.observe(frames: 1000, drops: 0, at: 0)
        _ = alarm.observe(frames: 1030, drops: 0, at: second)
        // The agent restarted: its counters began again from zero.
        let after = alarm.observe(frames: 10, drops: 0, at: 2 * second)
        #expect(after.share == 0 && !after.fire)
        let bad = alarm.observe(frames: 15, drops: 20, at: 3 * second)
        #expect(bad.fire)
    }
}

@Suite struct ForgedCountTests {
    /// Counts come from peers: the largest a forged message can carry adds up without a trap.
    @Test func dropTotalsAndTheDropAlarm_saturateInsteadOfTrapping() {
        let forged = DropTally(late: .max, outOfBuffers: .max, discontinuity: 1)
        #expect(forged.total == .max)
        var alarm = DropAlarm(threshold: 0.05, windowNanoseconds: 10_000_000_000)
        _ = alarm.observe(frames: 0, drops: 0, at: 0)
        let verdict = alarm.observe(frames: .max, drops: .max, at: 1_000_000_000)
        #expect(verdict.share > 0 && verdict.share <= 1)
    }
}
