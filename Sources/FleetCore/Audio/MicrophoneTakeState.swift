/// A microphone's part of a take as its agent enforces it (microphones.md, "In takes"): the
/// same rules as a camera's (`DeviceState`), for blocks of sound instead of frames. A block
/// from the take's start instant on is the take's, silence while consent is not granted; the
/// first block at or after the stop instant ends the part; consent withdrawn mid-take ends it
/// at once, keeping on this host what has not left it. Pure: events in, actions out.
public struct MicrophoneTakeState: Sendable {
    public enum Action: Sendable, Equatable {
        /// Tell the recording path.
        case beginTake(takeID: String)
        case endTake(TakeEnd)
    }

    public private(set) var consent: ConsentState
    public private(set) var take: TakeInProgress?

    public init(consent: ConsentState) { self.consent = consent }

    public mutating func consentChanged(to state: ConsentState, deviceDrops: DropTally) -> [Action] {
        let wasAllowed = consent.allowsRealFrames
        consent = state
        guard wasAllowed, !state.allowsRealFrames else { return [] }
        return endTake(reason: TakeStopCause.consentWithdrawn.reason, withholding: true, deviceDrops: deviceDrops)
    }

    /// Said again at every registration: the recording path takes the part up again if it dropped it.
    public mutating func takeBegan(takeID: String, startFleet: UInt64, deviceDrops: DropTally) -> [Action] {
        if take?.takeID != takeID { take = TakeInProgress(takeID: takeID, start: startFleet, deviceDrops: deviceDrops) }
        return [.beginTake(takeID: takeID)]
    }

    public mutating func takeStopAsked(
        takeID: String, stopFleet: UInt64?, nowFleet: UInt64?, cause: TakeStopCause, deviceDrops: DropTally
    )
        -> [Action]
    {
        guard var current = take, current.takeID == takeID else { return [] }
        guard current.stopAsked(at: stopFleet, nowFleet: nowFleet, withholding: cause.withholds) else {
            take = current
            return []
        }
        return endTake(reason: cause.reason, withholding: cause.withholds, deviceDrops: deviceDrops)
    }

    /// The clock passed the stop instant with no block after it.
    public mutating func takeStopDue(nowFleet: UInt64, deviceDrops: DropTally) -> [Action] {
        guard let current = take, current.isDue(nowFleet: nowFleet) else { return [] }
        return endTake(reason: TakeStopCause.stopped.reason, withholding: false, deviceDrops: deviceDrops)
    }

    /// What the take makes of a block captured at `fleetTime` (nil: the node has no fleet
    /// time, and nothing can place it): the take that keeps it with its drops, and what to do first.
    public mutating func blockCaptured(
        fleetTime: UInt64?, deviceDrops: DropTally
    ) -> (recordedFor: (takeID: String, drops: DropTally)?, actions: [Action]) {
        guard let fleetTime, let current = take else { return (nil, []) }
        switch current.fate(ofFrameAt: fleetTime) {
        case .outside: return (nil, [])
        case .record: return ((current.takeID, current.drops(deviceDrops: deviceDrops)), [])
        case .ends: return (nil, endTake(reason: TakeStopCause.stopped.reason, withholding: false, deviceDrops: deviceDrops))
        }
    }

    /// A block the recording path could not take.
    public mutating func handoffDropped(takeID: String) {
        guard take?.takeID == takeID else { return }
        take?.handoffDropped()
    }

    private mutating func endTake(reason: String, withholding: Bool, deviceDrops: DropTally) -> [Action] {
        guard let ended = take else { return [] }
        take = nil
        return [.endTake(TakeEnd(takeID: ended.takeID, drops: ended.drops(deviceDrops: deviceDrops), reason: reason, withholding: withholding))]
    }
}

/// Cuts a microphone's blocks, whatever their length, into the fixed-length blocks a take's
/// FLAC frames hold (10 ms), each with its first frame's place in the stream. A gap in the
/// stream (an overrun: the frames it lost are skipped in the count) is filled with silence, up
/// to `maxGapFrames`, so that a take's file keeps the microphone's timeline: a player or a
/// decoder that reads the samples one after the other (as ffmpeg does) finds every sound after
/// the gap at its time. A longer gap, or a block that goes back, drops the partial block before
/// it. Pure.
public struct AudioChunker: Sendable {
    public let channels: Int
    public let chunkFrames: Int
    public let maxGapFrames: UInt64
    private var pending: [Int16] = []
    private var pendingFirst: UInt64 = 0
    /// The frame after the last one added; nil before the first block.
    private var nextFrame: UInt64?

    public init(channels: Int, chunkFrames: Int, maxGapFrames: UInt64? = nil) {
        self.channels = max(channels, 1)
        self.chunkFrames = max(chunkFrames, 1)
        // Ten seconds of 10 ms chunks unless told.
        self.maxGapFrames = maxGapFrames ?? UInt64(self.chunkFrames) * 1_000
        pending.reserveCapacity(self.channels * self.chunkFrames * 2)
    }

    /// Adds `frames` frames of `samples` whose first is frame `first` of the stream; calls
    /// `chunk` with each whole chunk (its first frame, its samples).
    public mutating func add(
        _ samples: UnsafeBufferPointer<Int16>, frames: Int, first: UInt64, chunk: (UInt64, UnsafeBufferPointer<Int16>) -> Void
    ) {
        if let expected = nextFrame, expected != first {
            if first > expected, first - expected <= maxGapFrames {
                if pending.isEmpty { pendingFirst = expected }
                fill(silence: Int(first - expected), chunk: chunk)
            } else {
                pending.removeAll(keepingCapacity: true)
            }
        }
        nextFrame = first &+ UInt64(frames)
        if pending.isEmpty { pendingFirst = first }
        pending.append(contentsOf: samples[0..<(frames * channels)])
        emitWholeChunks(chunk)
    }

    /// Silence for the frames a gap lost, emitted a chunk at a time as it fills.
    private mutating func fill(silence frames: Int, chunk: (UInt64, UnsafeBufferPointer<Int16>) -> Void) {
        var left = frames
        while left > 0 {
            let room = chunkFrames - (pending.count / channels) % chunkFrames
            let now = min(left, room)
            pending.append(contentsOf: repeatElement(0, count: now * channels))
            left -= now
            emitWholeChunks(chunk)
        }
    }

    private mutating func emitWholeChunks(_ chunk: (UInt64, UnsafeBufferPointer<Int16>) -> Void) {
        var offset = 0
        while pending.count - offset >= chunkFrames * channels {
            pending.withUnsafeBufferPointer { buffer in
                chunk(pendingFirst, UnsafeBufferPointer(rebasing: buffer[offset..<(offset + chunkFrames * channels)]))
            }
            offset += chunkFrames * channels
            pendingFirst += UInt64(chunkFrames)
        }
        if offset > 0 { pending.removeFirst(offset) }
    }
}
