import Foundation

/// A fleet time (ns since the Unix epoch) as an operator reads it in a reply: an ISO 8601
/// UTC date to the millisecond.
enum FleetDate {
    static func text(_ fleetNs: UInt64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: Date(timeIntervalSince1970: Double(fleetNs) / 1e9))
    }
}
