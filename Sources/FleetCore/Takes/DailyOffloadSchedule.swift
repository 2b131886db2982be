/// When each storage destination's daily offload is due (`storage add --offload-daily HH:MM`,
/// recordings.md, "Offload"), as a pure decision: a destination is due once a day, at or after
/// its time of day. A coordinator that was not running at that time runs it when it starts later
/// that day (a run sends only what is not proved there, so a second one costs a look).
public struct DailyOffloadSchedule: Sendable, Equatable {
    /// The local day of each destination's last run (days since the calendar's epoch).
    private var lastDay: [String: Int] = [:]

    public init() {}

    /// Minutes after local midnight from "HH:MM" (00:00–23:59); nil for anything else.
    public static func minuteOfDay(_ text: String) -> Int? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCII) }),
            let hours = Int(parts[0]), let minutes = Int(parts[1]), (0..<24).contains(hours), (0..<60).contains(minutes)
        else { return nil }
        return hours * 60 + minutes
    }

    /// "HH:MM" of a minute of the day.
    public static func text(_ minuteOfDay: Int) -> String {
        let hours = minuteOfDay / 60, minutes = minuteOfDay % 60
        return (hours < 10 ? "0" : "") + "\(hours):" + (minutes < 10 ? "0" : "") + "\(minutes)"
    }

    /// The destinations due now (`day`, `minute` of the day, local), each taken as run:
    /// `schedules` has each scheduled destination's minute of the day. A destination no longer
    /// scheduled is forgotten.
    public mutating func due(_ schedules: [String: Int], day: Int, minute: Int) -> [String] {
        lastDay = lastDay.filter { schedules[$0.key] != nil }
        var due: [String] = []
        for (name, at) in schedules.sorted(by: { $0.key < $1.key }) where minute >= at && lastDay[name] != day {
            lastDay[name] = day
            due.append(name)
        }
        return due
    }
}
