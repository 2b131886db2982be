/// Decides when a device's drops deserve an alert: when the share of frames lost over a
/// sliding window (drops / (frames received + drops)) reaches a threshold. It fires on the
/// way up only and re-arms once the share falls below half the threshold, so a device that
/// keeps dropping raises one alert, not one a second. Pure: counts and time are passed in.
public struct DropAlarm: Sendable, Equatable {
    public let threshold: Double
    public let windowNanoseconds: UInt64
    private var samples: [(at: UInt64, frames: UInt64, drops: UInt64)] = []
    private var raised = false

    public init(threshold: Double, windowNanoseconds: UInt64) {
        self.threshold = threshold
        self.windowNanoseconds = max(1, windowNanoseconds)
    }

    public static func == (lhs: DropAlarm, rhs: DropAlarm) -> Bool {
        lhs.threshold == rhs.threshold && lhs.windowNanoseconds == rhs.windowNanoseconds && lhs.raised == rhs.raised
            && lhs.samples.elementsEqual(rhs.samples) { $0.at == $1.at && $0.frames == $1.frames && $0.drops == $1.drops }
    }

    /// The share lost over the window, and whether that should raise an alert now.
    /// `frames` and `drops` are cumulative; a counter that went backwards (a restarted
    /// agent) starts the window again.
    public mutating func observe(frames: UInt64, drops: UInt64, at now: UInt64) -> (share: Double, fire: Bool) {
        if let last = samples.last, frames < last.frames || drops < last.drops { samples.removeAll() }
        samples.append((now, frames, drops))
        // Keep the newest sample at or before the window's start as the baseline.
        while samples.count > 2, now - samples[1].at >= windowNanoseconds { samples.removeFirst() }
        guard let oldest = samples.first, samples.count >= 2 else { return (0, false) }
        let lost = drops - oldest.drops
        let total = (frames - oldest.frames).addingSaturated(lost)
        let share = total == 0 ? 0 : Double(lost) / Double(total)
        if !raised, lost > 0, share >= threshold {
            raised = true
            return (share, true)
        }
        if raised, share < threshold / 2 { raised = false }
        return (share, false)
    }
}
