import FleetCore
import Testing

/// Collect's copy of one segment: a window of chunk requests, bytes written in order, resumed
/// from what the partial copy holds, asked again after a silence, given up after several.
@Suite struct SegmentTransferTests {
    @Test func asksForAWindowOfChunks_thenOneMoreForEachWritten() {
        var transfer = SegmentTransfer(size: 10_000, have: 0, now: 0, chunkBytes: 1_000, window: 3)
        #expect(transfer.requests().map(\.offset) == [0, 1_000, 2_000])
        #expect(transfer.requests().isEmpty, "no more than the window outstanding")
        #expect(transfer.received(offset: 0, count: 1_000, fileSize: 10_000) == .write(offset: 0))
        transfer.written(count: 1_000, now: 1)
        #expect(transfer.requests().map(\.offset) == [3_000])
    }

    @Test func theLastChunkIsShort_andTheCopyCompletes() {
        var transfer = SegmentTransfer(size: 2_500, have: 0, now: 0, chunkBytes: 1_000, window: 8)
        #expect(transfer.requests().map(\.length) == [1_000, 1_000, 500])
        for offset in [0, 1_000] {
            #expect(transfer.received(offset: UInt64(offset), count: 1_000, fileSize: 2_500) == .write(offset: UInt64(offset)))
            transfer.written(count: 1_000, now: 1)
        }
        #expect(!transfer.isComplete)
        transfer.written(count: 500, now: 2)
        #expect(transfer.isComplete)
    }

    @Test func resumesFromWhatThePartialCopyHolds() {
        var transfer = SegmentTransfer(size: 5_000, have: 3_000, now: 0, chunkBytes: 1_000, window: 8)
        #expect(transfer.requests().map(\.offset) == [3_000, 4_000])
    }

    @Test func aChunkOutOfOrderOrRepeated_isIgnored() {
        var transfer = SegmentTransfer(size: 5_000, have: 0, now: 0, chunkBytes: 1_000, window: 8)
        _ = transfer.requests()
        #expect(transfer.received(offset: 1_000, count: 1_000, fileSize: 5_000) == .ignore)
        transfer.written(count: 1_000, now: 1)
        #expect(transfer.received(offset: 0, count: 1_000, fileSize: 5_000) == .ignore, "already written")
    }

    @Test func aFileOfAnotherSize_failsTheCopy() {
        let transfer = SegmentTransfer(size: 5_000, have: 0, now: 0)
        guard case .fail = transfer.received(offset: 0, count: 100, fileSize: 4_000) else {
            Issue.record("a file that is not the size indexed is not the file indexed")
            return
        }
    }

    @Test func aSilence_asksAgainFromTheFirstMissingByte_andEnoughOfThemGiveUp() {
        var transfer = SegmentTransfer(size: 10_000, have: 0, now: 0, chunkBytes: 1_000, window: 2, patience: 100, maxSilences: 2)
        _ = transfer.requests()
        transfer.written(count: 1_000, now: 10)
        _ = transfer.requests()
        #expect(transfer.tick(now: 50).isEmpty, "not silent long enough")
        #expect(transfer.tick(now: 110).map(\.offset) == [1_000, 2_000])
        #expect(transfer.failure == nil)
        _ = transfer.tick(now: 210)
        #expect(transfer.failure == nil)
        _ = transfer.tick(now: 310)
        #expect(transfer.failure != nil, "three silences in a row with no progress")
    }
}
