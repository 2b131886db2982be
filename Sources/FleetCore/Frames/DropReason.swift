/// Why a frame never reached the coordinator, in the vocabulary camera engineers know
/// from capture APIs' dropped-frame reasons.
public enum DropReason: String, CaseIterable, Sendable {
    /// The consumer was too slow: the send queue was full when the frame arrived.
    case late
    /// The source had no free buffer to capture into.
    case outOfBuffers = "out_of_buffers"
    /// The source's sequence number jumped: frames were lost before we saw them.
    case discontinuity
    /// The host's encoder for a take could not keep up: the frame was captured but never
    /// encoded (recordings.md, "Codecs").
    case encoderLate = "encoder_late"
}

/// Cumulative drop counts by reason.
public struct DropTally: Hashable, Sendable {
    public var late: UInt64 = 0
    public var outOfBuffers: UInt64 = 0
    public var discontinuity: UInt64 = 0
    public var encoderLate: UInt64 = 0

    public init(late: UInt64 = 0, outOfBuffers: UInt64 = 0, discontinuity: UInt64 = 0, encoderLate: UInt64 = 0) {
        self.late = late
        self.outOfBuffers = outOfBuffers
        self.discontinuity = discontinuity
        self.encoderLate = encoderLate
    }

    /// Saturating: counts come from peers, and a forged one must not crash whoever adds them up.
    public var total: UInt64 { late.addingSaturated(outOfBuffers).addingSaturated(discontinuity).addingSaturated(encoderLate) }

    public mutating func add(_ reason: DropReason, count: UInt64 = 1) {
        switch reason {
        case .late: late += count
        case .outOfBuffers: outOfBuffers += count
        case .discontinuity: discontinuity += count
        case .encoderLate: encoderLate += count
        }
    }

    /// Element-wise sum, saturating.
    public func adding(_ other: DropTally) -> DropTally {
        DropTally(
            late: late.addingSaturated(other.late), outOfBuffers: outOfBuffers.addingSaturated(other.outOfBuffers),
            discontinuity: discontinuity.addingSaturated(other.discontinuity), encoderLate: encoderLate.addingSaturated(other.encoderLate))
    }

    /// What was added since `earlier`, element-wise, never below zero.
    public func since(_ earlier: DropTally) -> DropTally {
        DropTally(
            late: late - min(late, earlier.late), outOfBuffers: outOfBuffers - min(outOfBuffers, earlier.outOfBuffers),
            discontinuity: discontinuity - min(discontinuity, earlier.discontinuity),
            encoderLate: encoderLate - min(encoderLate, earlier.encoderLate))
    }

    /// Element-wise maximum: two cumulative reports of the same counters, seen out of order.
    public func merging(_ other: DropTally) -> DropTally {
        DropTally(
            late: max(late, other.late), outOfBuffers: max(outOfBuffers, other.outOfBuffers),
            discontinuity: max(discontinuity, other.discontinuity), encoderLate: max(encoderLate, other.encoderLate))
    }

    public subscript(reason: DropReason) -> UInt64 {
        switch reason {
        case .late: late
        case .outOfBuffers: outOfBuffers
        case .discontinuity: discontinuity
        case .encoderLate: encoderLate
        }
    }
}

/// Turns a source's sequence numbers into discontinuity drops: a jump from 7 to 10
/// means frames 8 and 9 were lost before the agent saw them.
public struct SequenceGapDetector: Sendable {
    private var lastSequence: UInt64?

    public init() {}

    /// Returns how many frames were skipped before `sequence`.
    public mutating func observe(_ sequence: UInt64) -> UInt64 {
        defer { lastSequence = sequence }
        guard let last = lastSequence, sequence > last + 1 else { return 0 }
        return sequence - last - 1
    }

    public mutating func reset() { lastSequence = nil }
}

extension UInt64 {
    /// `self + other`, or `UInt64.max` where that would overflow.
    public func addingSaturated(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}
