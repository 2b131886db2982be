/// What the dashboard's browsers were last sent of the fleet, and what changed since: a pure
/// record (entries in, changes out) so that one read of the fleet a second, encoded once,
/// serves every browser watching, and an unchanged camera costs no bytes on the wire.
///
/// Entries are the JSON text of one wire object each (a `DeviceInfo`, a `DeviceStatus`…),
/// keyed by its device or node id, in one of the feed's tables.
struct DashboardFeedLedger: Sendable, Equatable {
    enum Table: String, CaseIterable, Sendable {
        case devices
        case deviceStats = "device_stats"
        case nodes
        case nodeStats = "node_stats"
        case pressure
    }

    /// Per table: id → the entry's JSON text.
    typealias Entries = [Table: [String: String]]

    struct Change: Sendable, Equatable {
        /// Entries new or different since the last update, per table, in id order.
        var changed: [Table: [String]] = [:]
        /// Ids no longer there, per table, in id order.
        var gone: [Table: [String]] = [:]

        var isEmpty: Bool { changed.values.allSatisfy(\.isEmpty) && gone.values.allSatisfy(\.isEmpty) }
    }

    private(set) var current: Entries = [:]

    /// Takes the fleet as it is now and says what differs from what was current.
    mutating func update(to next: Entries) -> Change {
        var change = Change()
        for table in Table.allCases {
            let before = current[table] ?? [:]
            let after = next[table] ?? [:]
            let changed = after.keys.sorted().compactMap { id in before[id] == after[id] ? nil : after[id] }
            let gone = before.keys.filter { after[$0] == nil }.sorted()
            if !changed.isEmpty { change.changed[table] = changed }
            if !gone.isEmpty { change.gone[table] = gone }
        }
        current = next
        return change
    }

    /// Everything current, as a change from nothing: what a browser that just joined needs.
    var whole: Change {
        var change = Change()
        for table in Table.allCases {
            let entries = current[table] ?? [:]
            if !entries.isEmpty { change.changed[table] = entries.keys.sorted().compactMap { entries[$0] } }
        }
        return change
    }
}
