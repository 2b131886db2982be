/// A GenICam camera's frame numbers as the fleet's ever-growing sequence (proto-docs
/// device-model.md, "GenICam cameras"). GigE Vision 1.x numbers its blocks in 16 bits, 1 to
/// 65535 and then 1 again (0 is never used), so a camera at 30 fps wraps every 36 minutes;
/// GigE Vision 2's extended ids and USB3 Vision's are 64 bits. A frame's sequence is its
/// block id plus the wraps counted so far, so numbers after a wrap follow on, and a gap across
/// it stays a gap. A stream opened again (the camera may number from 1 again) goes on from the
/// last sequence given. Pure.
public struct BlockIDSequence: Sendable, Equatable {
    private var lastBlockID: UInt64?
    private var base: UInt64 = 0
    /// The last sequence given, 0 before any.
    public private(set) var lastSequence: UInt64 = 0
    private var restarting = false

    public static let shortIDLimit: UInt64 = 0xFFFF

    public init(continuingAfter sequence: UInt64 = 0) {
        lastSequence = sequence
        restarting = sequence > 0
    }

    /// The sequence of the frame numbered `blockID` by the camera.
    public mutating func sequence(of blockID: UInt64) -> UInt64 {
        if restarting {
            // A new stream: it follows on from the last one, whatever the camera numbers it.
            restarting = false
            base = lastSequence &+ 1 &- blockID
        } else if let last = lastBlockID, blockID <= Self.shortIDLimit, last <= Self.shortIDLimit, blockID < last,
            last - blockID > Self.shortIDLimit / 2
        {
            // 65535 was followed by 1: one wrap, 0 skipped.
            base &+= Self.shortIDLimit
        }
        lastBlockID = blockID
        let sequence = base &+ blockID
        lastSequence = max(lastSequence, sequence)
        return sequence
    }

    /// The stream was opened again: its next frame follows on from the last sequence given.
    public mutating func restart() { restarting = lastSequence > 0 }
}
