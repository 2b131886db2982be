/// Which of a device's recorded consent changes the coordinator still pushes to its agent.
/// Changes are recorded in one order (the history's ids) and their requests resume, and
/// their pushes arrive, in another; an agent that applied a grant after the denial recorded
/// later would stream what nobody may see. So pushes to a device take turns, and at its
/// turn a push goes out only if its change is still the newest recorded: whatever the
/// interleaving, the last push a device gets carries its newest consent. Pure: the shell
/// keeps the turns and asks here when one comes.
public struct ConsentRelay: Sendable, Equatable {
    private var newest: [String: Int64] = [:]

    public init() {}

    /// A change stored for `deviceID` under history id `changeID`.
    public mutating func recorded(_ changeID: Int64, of deviceID: String) {
        newest[deviceID] = max(newest[deviceID] ?? .min, changeID)
    }

    /// Whether the change's push, now its turn has come, still goes out: false when a later
    /// change was recorded meanwhile (its own push follows and carries it).
    public func shouldPush(_ changeID: Int64, of deviceID: String) -> Bool {
        newest[deviceID].map { changeID >= $0 } ?? true
    }
}
