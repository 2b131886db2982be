/// The frames a take's encoder loses on its own thread (refused mid-encode, lost with a
/// packet the path could not take, left inside the encoder at a format change), put in the
/// order of the frames. The encoder runs behind capture, so a capture-time tally cannot hold
/// them: a lost frame must count in the take drops carried by the packets of the frames
/// after it and by the part's end, never by those before it (the ledger would read that as
/// drops beyond their gap) nor not at all (it would read the gap as a discontinuity).
/// Pure: the encoder numbers its frames as they arrive and says which it lost.
public struct EncoderDropOrder: Sendable {
    private var pending: [(ordinal: UInt64, reason: DropReason, count: UInt64)] = []
    /// Every loss of a frame before the last ordinal asked about.
    public private(set) var settled = DropTally()

    public init() {}

    /// `count` frames, numbered `ordinal` (several: frames that arrived together), are lost.
    public mutating func lost(_ reason: DropReason, count: UInt64 = 1, ordinal: UInt64) {
        guard count > 0 else { return }
        pending.append((ordinal, reason, count))
    }

    /// What the packet of the frame numbered `ordinal` carries: the losses of every frame
    /// before it. Ordinals asked about only grow (packets leave in frame order).
    public mutating func carried(by ordinal: UInt64) -> DropTally {
        guard !pending.isEmpty else { return settled }
        var later: [(ordinal: UInt64, reason: DropReason, count: UInt64)] = []
        for loss in pending {
            if loss.ordinal < ordinal { settled.add(loss.reason, count: loss.count) } else { later.append(loss) }
        }
        pending = later
        return settled
    }

    /// What the part's end carries: every loss.
    public mutating func all() -> DropTally { carried(by: .max) }
}
