import Testing

@testable import FleetCore

/// Which groups an encoded pre-roll's disk keeps (recordings.md, "On disk"), pure.
struct PreRollDiskLedgerTests {
    static let second: UInt64 = 1_000_000_000
    /// Group n: a second of packets from n s, 100 bytes.
    static func group(_ n: UInt64, bytes: Int = 100) -> PreRollDiskLedger.Group {
        PreRollDiskLedger.Group(first: n * second, last: n * second + 900_000_000, bytes: bytes)
    }

    @Test func groupsTheMemoryLetsGo_areKept_untilTheWindowPassesThem() {
        var ledger = PreRollDiskLedger()
        let window = 5 * Self.second
        for n in UInt64(1)...4 {
            let (kept, deleted) = ledger.add(Self.group(n), newest: (n + 2) * Self.second, window: window, budget: 10_000)
            #expect(kept && deleted.isEmpty)
        }
        #expect(ledger.bytes == 400 && ledger.oldestFleetTime == Self.second)
        // Newest at 7.5 s: group 1 (last packet 1.9 s) is more than 5 s behind.
        #expect(ledger.trim(newest: 7_500_000_000, window: window, budget: 10_000) == [Self.group(1)])
        #expect(ledger.groups(from: 3 * Self.second + 500_000_000).map(\.first) == [3 * Self.second, 4 * Self.second], "the group holding 3.5 s on")
        #expect(ledger.group(near: 2_930_000_000, within: 100_000_000)?.first == 2 * Self.second, "the frame nearest may end the group before")
        #expect(ledger.group(near: 3_500_000_000, within: 100_000_000)?.first == 3 * Self.second, "inside a group")
    }

    @Test func theBudgetInForce_letsTheOldestGo_andAGroupPastTheWindowIsNotKept() {
        var ledger = PreRollDiskLedger()
        for n in UInt64(1)...3 { _ = ledger.add(Self.group(n), newest: 4 * Self.second, window: 60 * Self.second, budget: 300) }
        let (kept, deleted) = ledger.add(Self.group(4), newest: 5 * Self.second, window: 60 * Self.second, budget: 300)
        #expect(kept && deleted == [Self.group(1)] && ledger.bytes == 300)
        // Pressure halves the disk: the two oldest go.
        #expect(ledger.trim(newest: 5 * Self.second, window: 60 * Self.second, budget: 150).count == 2 && ledger.bytes == 100)
        #expect(!ledger.add(Self.group(5, bytes: 400), newest: 6 * Self.second, window: 60 * Self.second, budget: 300).kept, "larger than the budget")
        #expect(!ledger.add(Self.group(2), newest: 7 * Self.second, window: 60 * Self.second, budget: 300).kept, "never out of order")
        #expect(
            !ledger.add(Self.group(6), newest: 7 * Self.second + 60 * Self.second, window: 60 * Self.second, budget: 300).kept,
            "already past the window")
        #expect(ledger.groups.isEmpty, "and the window has passed group 4 too")
        _ = ledger.add(Self.group(7), newest: 8 * Self.second, window: 60 * Self.second, budget: 300)
        ledger.remove(groupAt: 7 * Self.second)
        #expect(ledger.groups.isEmpty && ledger.bytes == 0)
        _ = ledger.add(Self.group(8), newest: 9 * Self.second, window: 60 * Self.second, budget: 300)
        #expect(ledger.clear() == [Self.group(8)] && ledger.groups.isEmpty && ledger.bytes == 0)
    }

    @Test func settings_refuseADiskForRawFrames() {
        #expect(PreRollSettings(seconds: 10, diskBudgetBytes: 64 << 20).refusal?.contains("raw frames") == true)
        let encoded = PreRollSettings(seconds: 10, encoding: TakeEncoding(codec: .h264), diskBudgetBytes: 64 << 20)
        #expect(encoded.refusal == nil && encoded.spillsToDisk && encoded.diskBudget(under: .serious) == 32 << 20)
        #expect(PreRollSettings(seconds: 10, encoding: TakeEncoding(codec: .h264), diskBudgetBytes: 1000).refusal?.contains("1 MiB") == true)
        #expect(PreRollSettings(wire: encoded.wire) == encoded && PreRollSettings(command: encoded.command) == encoded)
    }
}
