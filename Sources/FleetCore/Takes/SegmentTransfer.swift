/// One segment copied from an agent's disk to the coordinator's (`recordings collect`), as a
/// pure state machine: the coordinator asks for chunks, keeping at most `window` of them
/// outstanding (credit: the agent sends nothing it was not asked for), writes them in order,
/// and goes on from what its partial copy holds after a silence or a restart (resumable).
/// Chunks out of order or repeated are ignored; a silence of `patience` asks again from the
/// first missing byte; that many silences in a row without progress give up.
public struct SegmentTransfer: Sendable, Equatable {
    public struct Request: Sendable, Equatable {
        public let offset: UInt64
        public let length: Int
    }

    public enum Verdict: Sendable, Equatable {
        /// Write these bytes at `offset` (the next ones the copy needs), then call `written`.
        case write(offset: UInt64)
        /// Not the bytes awaited (repeated, or an answer to an earlier asking): dropped.
        case ignore
        /// The agent's file is not what the index says: give up.
        case fail(String)
    }

    public let size: UInt64
    public let chunkBytes: Int
    public let window: Int
    public let patience: UInt64
    public let maxSilences: Int
    /// Bytes the copy holds, from the start, in order.
    public private(set) var have: UInt64
    /// The next offset to ask for.
    private var asked: UInt64
    private var lastProgress: UInt64
    private var silences = 0
    public private(set) var failure: String?

    public init(
        size: UInt64, have: UInt64, now: UInt64, chunkBytes: Int = 1 << 20, window: Int = 8,
        patience: UInt64 = 10_000_000_000, maxSilences: Int = 3
    ) {
        self.size = size
        self.have = min(have, size)
        asked = self.have
        lastProgress = now
        self.chunkBytes = max(chunkBytes, 1)
        self.window = max(window, 1)
        self.patience = patience
        self.maxSilences = maxSilences
    }

    public var isComplete: Bool { have >= size }

    /// What to ask for now: up to `window` chunks beyond what the copy holds.
    public mutating func requests() -> [Request] {
        var requests: [Request] = []
        while asked < size, asked - have < UInt64(window * chunkBytes) {
            let length = Int(min(UInt64(chunkBytes), size - asked))
            requests.append(Request(offset: asked, length: length))
            asked += UInt64(length)
        }
        return requests
    }

    /// A chunk arrived: `fileSize` is the whole file's size as the agent sees it.
    public func received(offset: UInt64, count: Int, fileSize: UInt64) -> Verdict {
        guard fileSize == size else {
            return .fail("the agent's file is \(fileSize) bytes, the index says \(size): it changed since it was indexed")
        }
        guard offset == have, count > 0 || offset == size else { return .ignore }
        return .write(offset: offset)
    }

    /// The chunk at `have` is on disk.
    public mutating func written(count: Int, now: UInt64) {
        have += UInt64(count)
        if asked < have { asked = have }
        lastProgress = now
        silences = 0
    }

    /// Called now and then: after a silence, asks again from the first missing byte.
    public mutating func tick(now: UInt64) -> [Request] {
        guard !isComplete, failure == nil, now &- lastProgress >= patience else { return [] }
        silences += 1
        lastProgress = now
        guard silences <= maxSilences else {
            failure = "the agent sent nothing for \(maxSilences * Int(patience / 1_000_000_000)) s"
            return []
        }
        asked = have
        return requests()
    }
}
