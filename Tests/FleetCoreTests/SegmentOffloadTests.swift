import FleetCore
import Testing

@Suite struct SegmentOffloadTests {
    let hash = String(repeating: "ab", count: 32)
    let other = String(repeating: "cd", count: 32)

    @Test func aSegmentNotThere_isSent_thenProvedByTheStoresChecksum() {
        var offload = SegmentOffload(sizeBytes: 1000, sha256: hash)
        #expect(offload.handle(.started) == .stat)
        #expect(offload.handle(.found(size: nil)) == .upload)
        #expect(offload.handle(.uploaded) == .readStoreChecksum)
        #expect(offload.handle(.storeChecksum(hash.uppercased())) == .finish(.verified(sentBytes: 1000, proof: .storeChecksum)))
    }

    @Test func aStoreWithoutSHA256_isReadBack() {
        var offload = SegmentOffload(sizeBytes: 10, sha256: hash)
        _ = offload.handle(.started)
        _ = offload.handle(.found(size: nil))
        _ = offload.handle(.uploaded)
        #expect(offload.handle(.storeChecksum(nil)) == .readBack)
        #expect(offload.handle(.readBack(sha256: hash)) == .finish(.verified(sentBytes: 10, proof: .readBack)))
    }

    @Test func aWholeCopyAlreadyThere_isProvedAndNeverSentAgain() {
        var offload = SegmentOffload(sizeBytes: 1000, sha256: hash)
        _ = offload.handle(.started)
        #expect(offload.handle(.found(size: 1000)) == .readStoreChecksum)
        #expect(offload.handle(.storeChecksum(nil)) == .readBack)
        #expect(offload.handle(.readBack(sha256: hash)) == .finish(.verified(sentBytes: 0, proof: .readBack)))
    }

    /// A store whose listing says the size but whose copy cannot be read (a server's stale
    /// listing of a file cut short): replaced once, then proved; a copy sent now that cannot
    /// be read back is a failure.
    @Test func aFoundCopyThatCannotBeReadBack_isReplaced_butOneSentNowIsNot() {
        var offload = SegmentOffload(sizeBytes: 1000, sha256: hash)
        _ = offload.handle(.started)
        _ = offload.handle(.found(size: 1000))
        _ = offload.handle(.storeChecksum(nil))
        #expect(offload.handle(.stepFailed(reason: "unexpected EOF", destinationFull: false)) == .removeRemote)
        #expect(offload.replacedCorruptCopy?.contains("unexpected EOF") == true)
        #expect(offload.handle(.removed) == .upload)
        _ = offload.handle(.uploaded)
        _ = offload.handle(.storeChecksum(nil))
        #expect(
            offload.handle(.stepFailed(reason: "unexpected EOF", destinationFull: false))
                == .finish(.failed(reason: "unexpected EOF", destinationFull: false)))
    }

    @Test func aPartialCopy_isSentWhole() {
        var offload = SegmentOffload(sizeBytes: 1000, sha256: hash)
        _ = offload.handle(.started)
        #expect(offload.handle(.found(size: 400)) == .upload)
    }

    @Test func aCorruptedCopy_isRemovedAndSentOnce_thenAMismatchAgainFails() {
        var offload = SegmentOffload(sizeBytes: 1000, sha256: hash)
        _ = offload.handle(.started)
        _ = offload.handle(.found(size: 1000))
        #expect(offload.handle(.storeChecksum(other)) == .removeRemote)
        #expect(offload.replacedCorruptCopy?.contains(other) == true)
        #expect(offload.handle(.removed) == .upload)
        #expect(offload.handle(.uploaded) == .readStoreChecksum)
        guard case .finish(.failed(let reason, let full)) = offload.handle(.storeChecksum(other)) else {
            Issue.record("a second mismatch ends the offload")
            return
        }
        #expect(!full && reason.contains("alters what it stores"), "\(reason)")
        #expect(offload.sentBytes == 1000)
    }

    @Test func aCorruptedCopySentAgain_thatMatches_isVerifiedWithItsBytesCounted() {
        var offload = SegmentOffload(sizeBytes: 1000, sha256: hash)
        _ = offload.handle(.started)
        _ = offload.handle(.found(size: 1000))
        _ = offload.handle(.storeChecksum(nil))
        #expect(offload.handle(.readBack(sha256: other)) == .removeRemote)
        _ = offload.handle(.removed)
        _ = offload.handle(.uploaded)
        _ = offload.handle(.storeChecksum(nil))
        #expect(offload.handle(.readBack(sha256: hash)) == .finish(.verified(sentBytes: 1000, proof: .readBack)))
    }

    @Test func aFailedStep_endsWithItsReason_andWhetherTheDestinationIsFull() {
        var offload = SegmentOffload(sizeBytes: 1000, sha256: hash)
        _ = offload.handle(.started)
        _ = offload.handle(.found(size: nil))
        let full = SegmentOffload.Action.finish(.failed(reason: "507 Insufficient Storage", destinationFull: true))
        #expect(offload.handle(.stepFailed(reason: "507 Insufficient Storage", destinationFull: true)) == full)
        #expect(offload.handle(.uploaded) == full, "nothing after the end")
    }

    @Test func theLayout_isTakeCameraSegment_andNoNameClimbsOut() {
        let layout = OffloadLayout(root: "/studio/../takes/")
        #expect(layout.segment(takeID: "take-1", deviceID: "cam/0", fileName: "cam-0-0001.mkv") == "studio/takes/take-1/cam_0/cam-0-0001.mkv")
        #expect(layout.takeIndex("take-1") == "studio/takes/take-1/take.json")
        #expect(layout.syncReport("take-1") == "studio/takes/take-1/sync-report.json")
        #expect(OffloadLayout(root: "").takeFolder("..") == "_..")
        #expect(OffloadLayout.component("") == "_")
    }
}
