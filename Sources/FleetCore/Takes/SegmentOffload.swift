/// One segment's copy to a storage destination (`recordings offload`), as a pure state
/// machine: look at what the destination already holds, send the file only if it does not hold
/// a copy of the right size, then prove the copy by its SHA-256 (the store's own checksum where
/// it keeps one, else the object read back) against the index's. A copy found whole is proved,
/// never sent again; a copy whose checksum differs is removed and sent once more; a second
/// mismatch, or any step that fails, ends the offload of this segment with the reason (the
/// coordinator orders it again later).
public struct SegmentOffload: Sendable, Equatable {
    public enum Action: Sendable, Equatable {
        /// Ask the destination for the object's size (absent: not there).
        case stat
        /// Send the local file to the object.
        case upload
        /// Ask the destination for the object's SHA-256, as it keeps one.
        case readStoreChecksum
        /// Read the object back and hash what arrives.
        case readBack
        /// Remove the object (its bytes are not the segment's).
        case removeRemote
        case finish(Outcome)
    }

    public enum Outcome: Sendable, Equatable {
        /// The destination holds the segment, proved by `proof`; `sentBytes` were sent for it
        /// now (0: it was there already).
        case verified(sentBytes: UInt64, proof: Proof)
        /// Not proved: why, and whether the destination said it is full.
        case failed(reason: String, destinationFull: Bool)
    }

    public enum Proof: String, Sendable, Equatable {
        /// The store's own SHA-256 of the object.
        case storeChecksum = "store_checksum"
        /// The object read back and hashed here.
        case readBack = "read_back"
    }

    public enum Event: Sendable, Equatable {
        case started
        /// The object's size; nil when it is not there.
        case found(size: UInt64?)
        case uploaded
        /// The store's SHA-256 of the object; nil when it keeps none of that kind.
        case storeChecksum(String?)
        case readBack(sha256: String)
        case removed
        /// A step failed: what the tool said, and whether it says the destination is full.
        case stepFailed(reason: String, destinationFull: Bool)
    }

    public let sizeBytes: UInt64
    public let sha256: String
    /// How many times a copy whose checksum differs is removed and sent again.
    public let resends: Int
    public private(set) var sentBytes: UInt64 = 0
    public private(set) var outcome: Outcome?
    private var resent = 0
    private var mismatch: String?
    /// Proving a copy found there (not one sent now): one that cannot be read is not a proof,
    /// and is replaced rather than given up on.
    private var provingFound = false

    public init(sizeBytes: UInt64, sha256: String, resends: Int = 1) {
        self.sizeBytes = sizeBytes
        self.sha256 = sha256.lowercased()
        self.resends = resends
    }

    public mutating func handle(_ event: Event) -> Action {
        guard outcome == nil else { return .finish(outcome!) }
        switch event {
        case .started:
            return .stat
        case .found(let size):
            // A copy of the right size may be whole (an earlier run's, cut off before its
            // report): prove it rather than send it again.
            provingFound = size == sizeBytes
            return size == sizeBytes ? .readStoreChecksum : .upload
        case .uploaded:
            sentBytes += sizeBytes
            provingFound = false
            return .readStoreChecksum
        case .storeChecksum(let checksum):
            guard let checksum else { return .readBack }
            return judge(checksum, proof: .storeChecksum)
        case .readBack(let checksum):
            return judge(checksum, proof: .readBack)
        case .removed:
            return .upload
        case .stepFailed(let reason, let full):
            // A found copy that cannot be read back (a store's listing that says more than it
            // holds) is replaced once, as a corrupt one is.
            if provingFound, !full, resent < resends {
                provingFound = false
                resent += 1
                mismatch = "the copy found there could not be read back: \(reason)"
                return .removeRemote
            }
            return finish(.failed(reason: reason, destinationFull: full))
        }
    }

    private mutating func judge(_ checksum: String, proof: Proof) -> Action {
        if checksum.lowercased() == sha256 { return finish(.verified(sentBytes: sentBytes, proof: proof)) }
        let said = "the destination's copy has SHA-256 \(checksum.lowercased()), the index \(sha256)"
        guard resent < resends else {
            return finish(.failed(reason: "\(said) after it was sent again: the destination alters what it stores", destinationFull: false))
        }
        resent += 1
        mismatch = said
        provingFound = false
        return .removeRemote
    }

    private mutating func finish(_ result: Outcome) -> Action {
        outcome = result
        return .finish(result)
    }

    /// Whether a corrupted copy was found and sent again on the way (for the report).
    public var replacedCorruptCopy: String? { mismatch }
}
