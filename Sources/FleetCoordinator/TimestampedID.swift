import Foundation

/// Ids of takes, stills and moments: they sort by time and say when, with a few random
/// characters so two made in one second differ (take-20261123-194501-3f2a).
enum TimestampedID {
    static func make(_ prefix: String, at date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd-HHmmss"
        return prefix + "-" + formatter.string(from: date) + "-" + UUID().uuidString.lowercased().prefix(4)
    }
}
