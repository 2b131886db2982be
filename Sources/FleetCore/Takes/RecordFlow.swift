/// What the coordinator last said about one device's recording path (record.proto's
/// RecordCredit), in the device's own sequence numbers.
public struct RecordCredit: Sendable, Equatable {
    public var stream: UInt64
    /// Only in the answer to a resume: send the frames after this one (nil: all of them).
    public var resumeAfter: UInt64?
    /// On the coordinator's disk: the agent may forget these.
    public var storedThrough: UInt64?
    /// Taken off the wire: no longer in flight.
    public var consumedThrough: UInt64?
    public var windowFrames: Int
    public var windowBytes: Int

    public init(
        stream: UInt64, resumeAfter: UInt64? = nil, storedThrough: UInt64? = nil, consumedThrough: UInt64? = nil,
        windowFrames: Int, windowBytes: Int
    ) {
        self.stream = stream
        self.resumeAfter = resumeAfter
        self.storedThrough = storedThrough
        self.consumedThrough = consumedThrough
        self.windowFrames = windowFrames
        self.windowBytes = windowBytes
    }
}

/// The agent's side of one device's part of a take on the lossless recording path: the
/// frames waiting, in capture order, and which of them may go now. A frame leaves only under
/// the coordinator's credit (never more frames or bytes in flight than its window), is kept
/// until the coordinator says it is on disk, and is sent again after a resume if the
/// coordinator never stored it. Pure: the sender feeds it frames, credits and the time.
///
/// `Payload` is wherever the frame's bytes are kept (memory or a spool file); the flow hands
/// it back when the frame may be forgotten.
public struct RecordFlow<Payload: Sendable>: Sendable {
    public enum Step: Sendable {
        /// Send this frame under the current stream, then call `markSent()`.
        case frame(sequence: UInt64, payload: Payload)
        /// Every frame went: send the end, then call `markEndSent()`.
        case end
        case idle
    }

    private struct Entry: Sendable {
        let sequence: UInt64
        let bytes: Int
        let payload: Payload
    }

    /// How long the coordinator may say nothing while frames wait before the agent asks
    /// again where to go on from (the connection may have died with frames in it).
    public let resumeInterval: UInt64
    public private(set) var stream: UInt64?
    public private(set) var isDone = false
    public private(set) var endQueued = false
    private var endSent = false
    /// Entries not yet stored by the coordinator, oldest first; `base` is the absolute
    /// position of `entries[0]`.
    private var entries: [Entry] = []
    private var base = 0
    private var next = 0
    private var consumed = 0
    private var inFlightBytes = 0
    private var windowFrames = 0
    private var windowBytes = 0
    private var lastHeard: UInt64 = 0
    private var lastAsked: UInt64?
    private var resumeWanted = true
    public private(set) var waitingBytes = 0

    public init(resumeInterval: UInt64 = 3_000_000_000) {
        self.resumeInterval = resumeInterval
    }

    public var waitingFrames: Int { entries.count }
    public var lastSequence: UInt64? { entries.last?.sequence }

    /// A captured frame joins the queue; sequences only go up.
    public mutating func append(sequence: UInt64, bytes: Int, payload: Payload) {
        precondition(entries.last.map { sequence > $0.sequence } ?? true, "recorded frames are queued in sequence order")
        entries.append(Entry(sequence: sequence, bytes: bytes, payload: payload))
        waitingBytes += bytes
    }

    /// The device's part ends after the frames queued so far.
    public mutating func queueEnd() { endQueued = true }

    /// Whether to send a resume now: nothing heard since asking, or frames waiting and the
    /// coordinator silent for `resumeInterval`.
    public func shouldAskToResume(now: UInt64) -> Bool {
        guard !isDone else { return false }
        if resumeWanted { return lastAsked.map { now &- $0 >= resumeInterval } ?? true }
        let waiting = !entries.isEmpty || (endQueued && !endSent) || (endSent && !isDone)
        return waiting && now &- max(lastHeard, lastAsked ?? 0) >= resumeInterval
    }

    /// A resume was sent: nothing more goes until its answer, which names a new stream.
    public mutating func askedToResume(now: UInt64) {
        lastAsked = now
        resumeWanted = true
        stream = nil
    }

    /// The coordinator may have lost what was in flight (the agent registered again).
    public mutating func connectionRenewed() {
        resumeWanted = true
        lastAsked = nil
    }

    /// Applies a credit. Returns the payloads the coordinator has stored, to be released.
    public mutating func apply(_ credit: RecordCredit, now: UInt64) -> [Payload] {
        guard !isDone else { return [] }
        if let current = stream, credit.stream < current { return [] }
        // A credit for another stream than the one asked for, while waiting: a stale answer.
        if stream == nil, !resumeWanted { return [] }
        lastHeard = now
        if stream != credit.stream {
            // A new stream answers a resume: start again after what the coordinator has.
            stream = credit.stream
            resumeWanted = false
            next = base + (credit.resumeAfter.map { after in entries.firstIndex { $0.sequence > after } ?? entries.count } ?? 0)
            consumed = next
            inFlightBytes = 0
            endSent = false
        }
        windowFrames = max(credit.windowFrames, 1)
        windowBytes = max(credit.windowBytes, 0)
        var released: [Payload] = []
        if let stored = credit.storedThrough {
            let count = entries.prefix { $0.sequence <= stored }.count
            for entry in entries.prefix(count) {
                released.append(entry.payload)
                waitingBytes -= entry.bytes
            }
            // Stored frames not yet sent on this stream need not go at all.
            let sentAndStored = min(next, base + count)
            if consumed < sentAndStored {
                for position in consumed..<sentAndStored { inFlightBytes -= entries[position - base].bytes }
            }
            entries.removeFirst(count)
            base += count
            next = max(next, base)
            consumed = max(consumed, base)
        }
        if let through = credit.consumedThrough {
            while consumed < next, entries[consumed - base].sequence <= through {
                inFlightBytes -= entries[consumed - base].bytes
                consumed += 1
            }
        }
        return released
    }

    /// The coordinator has the whole part: everything waiting is released.
    public mutating func finish() -> [Payload] {
        isDone = true
        defer {
            entries.removeAll()
            waitingBytes = 0
        }
        return entries.map(\.payload)
    }

    /// Consent was withdrawn: frames not yet sent never leave the host. Returns them, to be
    /// released; the part ends after what already went.
    public mutating func withholdUnsent() -> [Payload] {
        let keep = max(next - base, 0)
        let withheld = entries.suffix(from: keep)
        waitingBytes -= withheld.reduce(0) { $0 + $1.bytes }
        defer { entries.removeLast(entries.count - keep) }
        endQueued = true
        return withheld.map(\.payload)
    }

    /// What may go now.
    public func nextStep() -> Step {
        guard let _ = stream, !isDone else { return .idle }
        let end = base + entries.count
        if next < end {
            let entry = entries[next - base]
            let inFlight = next - consumed
            let fits = inFlight == 0 || (inFlight < windowFrames && inFlightBytes + entry.bytes <= windowBytes)
            return fits ? .frame(sequence: entry.sequence, payload: entry.payload) : .idle
        }
        return endQueued && !endSent ? .end : .idle
    }

    public mutating func markSent() {
        inFlightBytes += entries[next - base].bytes
        next += 1
    }

    public mutating func markEndSent() { endSent = true }
}
