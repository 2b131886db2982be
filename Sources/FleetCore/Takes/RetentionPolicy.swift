/// How much recordings may keep: a disk budget and an age limit, enforced oldest first,
/// never on a take that is still recording. Zero means no limit.
public struct RetentionPolicy: Sendable, Equatable {
    public var budgetBytes: Int64 = 0
    public var maximumAgeSeconds: Int64 = 0

    public init(budgetBytes: Int64 = 0, maximumAgeSeconds: Int64 = 0) {
        self.budgetBytes = budgetBytes
        self.maximumAgeSeconds = maximumAgeSeconds
    }

    /// The takes to delete, oldest first: those past the age limit, and the oldest until
    /// what is left fits the budget. Takes still recording count toward the budget but are
    /// never chosen. `createdAt` and `now` in Unix milliseconds.
    public func expired(_ takes: [(id: String, createdAt: Int64, bytes: Int64, recording: Bool)], now: Int64) -> [String] {
        var remaining = takes.reduce(Int64(0)) { $0 + $1.bytes }
        var chosen: [String] = []
        for take in takes.sorted(by: { $0.createdAt < $1.createdAt }) where !take.recording {
            let tooOld = maximumAgeSeconds > 0 && now - take.createdAt > maximumAgeSeconds * 1000
            let overBudget = budgetBytes > 0 && remaining > budgetBytes
            guard tooOld || overBudget else { continue }
            chosen.append(take.id)
            remaining -= take.bytes
        }
        return chosen
    }
}
