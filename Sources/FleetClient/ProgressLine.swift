import Foundation

/// What a long transfer shows on a terminal: a bar, how much of how much, the rate and the
/// time left. Pure: the caller says how much is done and how long it has run, and decides
/// whether there is a terminal to show it on (never in scripts or with --json).
public struct ProgressLine: Sendable, Equatable {
    public var label: String
    public var done: UInt64
    /// 0 while unknown.
    public var total: UInt64
    public var elapsedSeconds: Double
    /// "bytes", or the name of what is counted ("segments").
    public var unit: String

    public init(label: String, done: UInt64, total: UInt64, elapsedSeconds: Double, unit: String = "bytes") {
        self.label = label
        self.done = done
        self.total = total
        self.elapsedSeconds = elapsedSeconds
        self.unit = unit
    }

    public static let barWidth = 24

    /// Per second, once there is something to measure it by.
    public var rate: Double? {
        guard elapsedSeconds >= 0.2, done > 0 else { return nil }
        return Double(done) / elapsedSeconds
    }

    /// Seconds until `total` at the rate so far.
    public var secondsLeft: Double? {
        guard let rate, rate > 0, total >= done, total > 0 else { return nil }
        return Double(total - done) / rate
    }

    public var text: String {
        let share = total > 0 ? min(Double(done) / Double(total), 1) : 0
        let filled = Int((share * Double(Self.barWidth)).rounded(.down))
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: Self.barWidth - filled)
        let isBytes = unit == "bytes"
        func amount(_ value: UInt64) -> String { isBytes ? RecordingViews.bytes(value) : "\(value)" }
        var line = "\(label) [\(bar)] " + String(format: "%3.0f%%", share * 100)
        line += " " + (total > 0 ? "\(amount(done)) of \(amount(total))" : amount(done)) + (isBytes ? "" : " \(unit)")
        if let rate {
            line += isBytes ? ", \(RecordingViews.bytes(UInt64(rate)))/s" : String(format: ", %.1f %@/s", rate, unit)
        }
        if done < total, let left = secondsLeft { line += ", \(Self.duration(left)) left" }
        return line
    }

    /// `42 s`, `3 min 05 s`, `1 h 02 min`.
    public static func duration(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded(.up))
        if whole < 60 { return "\(whole) s" }
        if whole < 3600 { return String(format: "%d min %02d s", whole / 60, whole % 60) }
        return String(format: "%d h %02d min", whole / 3600, (whole % 3600) / 60)
    }
}
