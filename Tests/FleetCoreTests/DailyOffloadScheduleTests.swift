import FleetCore
import Testing

@Suite struct DailyOffloadScheduleTests {
    @Test func aTimeOfDay_isReadAsHoursAndMinutesOnly() {
        #expect(DailyOffloadSchedule.minuteOfDay("02:30") == 150)
        #expect(DailyOffloadSchedule.minuteOfDay("00:00") == 0)
        #expect(DailyOffloadSchedule.minuteOfDay("23:59") == 1439)
        for wrong in ["24:00", "2:30", "02:3", "02:60", "0230", "02:30:00", "", "-1:00", "٠٢:٣٠"] {
            #expect(DailyOffloadSchedule.minuteOfDay(wrong) == nil, "\(wrong)")
        }
        #expect(DailyOffloadSchedule.text(150) == "02:30")
        #expect(DailyOffloadSchedule.text(1439) == "23:59")
    }

    @Test func aDestination_isDueOnceADayAtOrAfterItsTime() {
        var schedule = DailyOffloadSchedule()
        let at = ["nas": 120, "s3": 600]
        #expect(schedule.due(at, day: 10, minute: 119).isEmpty, "before its time")
        #expect(schedule.due(at, day: 10, minute: 120) == ["nas"])
        #expect(schedule.due(at, day: 10, minute: 121).isEmpty, "once a day")
        #expect(schedule.due(at, day: 10, minute: 900) == ["s3"])
        #expect(schedule.due(at, day: 11, minute: 60).isEmpty)
        #expect(schedule.due(at, day: 11, minute: 700) == ["nas", "s3"], "the next day, both")
    }

    @Test func aCoordinatorStartedLate_runsTheDaysOffloadAtOnce() {
        var schedule = DailyOffloadSchedule()
        #expect(schedule.due(["nas": 120], day: 3, minute: 480) == ["nas"])
        #expect(schedule.due(["nas": 120], day: 3, minute: 481).isEmpty)
    }

    @Test func aScheduleRemovedAndSetAgain_isDueAgain() {
        var schedule = DailyOffloadSchedule()
        #expect(schedule.due(["nas": 120], day: 3, minute: 200) == ["nas"])
        #expect(schedule.due([:], day: 3, minute: 201).isEmpty)
        #expect(schedule.due(["nas": 300], day: 3, minute: 301) == ["nas"], "a new schedule is a new one")
    }
}
