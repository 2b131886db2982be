/// What a take holds of one device's frames: which frames belong to it (the first at or after
/// its start, none at or after its stop, none twice), and every frame of the device's sequence
/// in between that it does not hold, with a reason. The invariant a take is checked against:
/// stored + dropped = last sequence − first sequence + 1. Pure: the recorder feeds it headers.
public struct TakeFrameLedger: Sendable, Equatable {
    public enum Verdict: Sendable, Equatable {
        case keep
        /// Captured before the take's start instant.
        case beforeStart
        /// Captured at or after the take's stop instant.
        case afterStop
        /// A sequence number the take already holds or passed (a frame sent again after a
        /// reconnect): kept once.
        case duplicate
    }

    /// Fleet ns: the take's first instant, and its end once known.
    public let start: UInt64
    public private(set) var stop: UInt64?
    public private(set) var stored: UInt64 = 0
    public private(set) var dropped = DropTally()
    public private(set) var firstSequence: UInt64?
    public private(set) var lastSequence: UInt64?
    public private(set) var firstFleetTime: UInt64?
    public private(set) var lastFleetTime: UInt64?
    /// The device's cumulative drops as of the last frame seen (kept or not).
    private var reportedDrops: DropTally?
    private var lastSeenSequence: UInt64?

    public init(start: UInt64) { self.start = start }

    /// Goes on with a part recorded before (a restarted coordinator): what the index holds.
    public init(
        start: UInt64, stop: UInt64?, stored: UInt64, dropped: DropTally, firstSequence: UInt64?, lastSequence: UInt64?,
        firstFleetTime: UInt64?, lastFleetTime: UInt64?
    ) {
        self.start = start
        self.stop = stop
        self.stored = stored
        self.dropped = dropped
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.firstFleetTime = firstFleetTime
        self.lastFleetTime = lastFleetTime
        lastSeenSequence = lastSequence
    }

    /// The sender's drop counts start again from zero: its agent restarted.
    public mutating func restartDropReports() { reportedDrops = DropTally() }

    public mutating func stop(at fleetTime: UInt64) { stop = fleetTime }

    /// Frames between the first and the last held, by sequence.
    public var accountedFor: UInt64 { stored.addingSaturated(dropped.total) }

    /// One frame's header: its sequence, capture time in fleet time, and the device's
    /// cumulative drops by reason when it was sent.
    public mutating func admit(sequence: UInt64, fleetTime: UInt64, cumulativeDrops: DropTally) -> Verdict {
        defer {
            if lastSeenSequence.map({ sequence > $0 }) ?? true {
                lastSeenSequence = sequence
                reportedDrops = cumulativeDrops
            }
        }
        guard fleetTime >= start else { return .beforeStart }
        if let stop, fleetTime >= stop { return .afterStop }
        if let lastSequence, sequence <= lastSequence { return .duplicate }
        if lastSequence != nil, let previous = lastSeenSequence, sequence > previous + 1 {
            attributeGap(of: sequence - previous - 1, reported: cumulativeDrops)
        }
        if firstSequence == nil {
            firstSequence = sequence
            firstFleetTime = fleetTime
        }
        lastSequence = sequence
        lastFleetTime = fleetTime
        stored += 1
        return .keep
    }

    /// The part ends; `cumulativeDrops` is what the device reported for the take at its end.
    /// Frames of the take after the last one held (the encoder late for the last frames, a
    /// spool full at the end) show as no later frame's gap: they count here, by reason, and
    /// the span runs through them, so stored + dropped = last − first + 1 still holds. Only
    /// when the last frame seen is the last one held (nothing after it was seen and refused)
    /// and its report is known.
    public mutating func end(cumulativeDrops: DropTally) {
        guard let last = lastSequence, lastSeenSequence == last, let reported = reportedDrops else { return }
        let tail = cumulativeDrops.since(reported)
        guard tail.total > 0 else { return }
        dropped = dropped.adding(tail)
        lastSequence = last.addingSaturated(tail.total)
        lastSeenSequence = lastSequence
        reportedDrops = cumulativeDrops
    }

    /// Missing sequence numbers take the reasons the device reported since the last frame,
    /// source-side reasons first, then the take's encoder falling behind; what no report explains is a discontinuity. Reported drops
    /// beyond the gap were the live path's (newest frame wins), not the take's.
    private mutating func attributeGap(of gap: UInt64, reported: DropTally) {
        let previous = reportedDrops ?? reported
        func since(_ now: UInt64, _ before: UInt64) -> UInt64 { now >= before ? now - before : now }
        var left = gap
        let outOfBuffers = min(left, since(reported.outOfBuffers, previous.outOfBuffers))
        left -= outOfBuffers
        let encoderLate = min(left, since(reported.encoderLate, previous.encoderLate))
        left -= encoderLate
        let late = min(left, since(reported.late, previous.late))
        left -= late
        dropped.outOfBuffers += outOfBuffers
        dropped.encoderLate += encoderLate
        dropped.late += late
        dropped.discontinuity += left
    }
}
