/// Which groups of an encoded pre-roll's packets its host's disk keeps (recordings.md, "On
/// disk"): those the memory budget let go, oldest first, while they lie inside the window
/// behind the newest frame kept and fit the disk budget in force. A group is a key frame and
/// the packets after it, kept or let go whole, so the disk's part always begins where a
/// decoder can and runs on into the memory's. Pure: the caller writes and deletes the files.
public struct PreRollDiskLedger: Sendable, Equatable {
    public struct Group: Sendable, Equatable {
        /// The capture times of its key frame and of its last packet.
        public let first: UInt64
        public let last: UInt64
        public let bytes: Int

        public init(first: UInt64, last: UInt64, bytes: Int) {
            self.first = first
            self.last = last
            self.bytes = bytes
        }
    }

    public private(set) var groups: [Group] = []
    public private(set) var bytes = 0

    public init() {}

    /// A group the memory let go. `newest` is the newest frame kept anywhere, `window` the
    /// pre-roll's, `budget` the disk the host's pressure leaves it. Whether the group is kept
    /// (one already past the window, or larger than the whole budget, is not), and the groups
    /// to delete for it, oldest first.
    public mutating func add(_ group: Group, newest: UInt64, window: UInt64, budget: Int) -> (kept: Bool, deleted: [Group]) {
        guard group.bytes <= budget, newest < group.last || newest - group.last <= window,
            groups.last.map({ $0.last < group.first }) ?? true
        else { return (false, trim(newest: newest, window: window, budget: budget)) }
        groups.append(group)
        bytes += group.bytes
        return (true, trim(newest: newest, window: window, budget: budget))
    }

    /// The groups the window has moved past, or the budget in force no longer holds, oldest
    /// first; a group goes once its last packet is older than the window.
    public mutating func trim(newest: UInt64, window: UInt64, budget: Int) -> [Group] {
        var deleted: [Group] = []
        while let oldest = groups.first, bytes > budget || (newest > oldest.last && newest - oldest.last > window) {
            deleted.append(groups.removeFirst())
            bytes -= oldest.bytes
        }
        return deleted
    }

    /// Forgets one group (its file could not be written).
    public mutating func remove(groupAt first: UInt64) {
        guard let index = groups.firstIndex(where: { $0.first == first }) else { return }
        bytes -= groups.remove(at: index).bytes
    }

    /// Everything, to delete (consent withdrawn, the pre-roll turned off or kept otherwise).
    public mutating func clear() -> [Group] {
        defer {
            groups = []
            bytes = 0
        }
        return groups
    }

    /// The groups with packets captured at or after `fleetTime`, oldest first.
    public func groups(from fleetTime: UInt64) -> [Group] { groups.filter { $0.last >= fleetTime } }

    /// The group nearest `instant` (none farther than `reach`): the one whose packets span it,
    /// else the one whose first or last packet is nearer; the earlier on a tie.
    public func group(near instant: UInt64, within reach: UInt64) -> Group? {
        func distance(_ group: Group) -> UInt64 {
            if group.first > instant { return group.first - instant }
            return group.last < instant ? instant - group.last : 0
        }
        return groups.filter { distance($0) <= reach }.min { distance($0) < distance($1) }
    }

    public var oldestFleetTime: UInt64? { groups.first?.first }
}
