import Foundation

/// When to start a free-running source (a UVC webcam, vivid: its driver times its frames) so
/// that its frames land on the fleet's grid: its one lever on its phase is the instant its
/// stream starts. Each start teaches how far after the start call its frames fall, modulo a
/// frame interval (`startOffset`); the next start is timed so that offset lands on a slot.
/// Afterwards the source runs free again and drifts at its own rate error. Pure: times in,
/// an instant out; the agent stops and starts the stream.
public struct FreeRunStart: Sendable, Equatable {
    /// Frames after a start that teach its offset; the first ones are skipped (a driver's first
    /// buffers may come early or late, before its timing settles).
    public static let framesSkipped = 2
    public static let framesLearnt = 8

    /// How long after a start call its frames fell, modulo the frame interval then.
    public struct StartOffset: Sendable, Equatable {
        public var offset: UInt64
        public var period: UInt64
    }
    /// The circular mean over the frames learnt of the latest start that delivered enough
    /// (nil until one has).
    public private(set) var startOffset: StartOffset?
    /// The start being learnt: when it was called, its interval, the frames seen so far.
    private struct Learning: Sendable, Equatable {
        var start: UInt64
        var period: UInt64
        var frames: [UInt64] = []
    }
    private var learning: Learning?

    public init() {}

    /// A stream was started (STREAMON called) at `monotonic` ns, to run at `period` ns a frame.
    public mutating func started(atMonotonic monotonic: UInt64, period: UInt64) {
        learning = period > 0 ? Learning(start: monotonic, period: period) : nil
    }

    /// A frame of the latest start, captured at `monotonic` ns (its driver's timestamp).
    /// True while the start still wants frames (the caller may stop telling it once false).
    @discardableResult
    public mutating func frameCaptured(atMonotonic monotonic: UInt64) -> Bool {
        guard var current = learning else { return false }
        guard monotonic >= current.start else { return true }
        current.frames.append(monotonic)
        guard current.frames.count >= Self.framesSkipped + Self.framesLearnt else {
            learning = current
            return true
        }
        let offsets = current.frames.dropFirst(Self.framesSkipped).map { ($0 - current.start) % current.period }
        startOffset = StartOffset(offset: Self.circularMean(offsets, period: current.period), period: current.period)
        learning = nil
        return false
    }

    /// Whether a start is still being learnt.
    public var isLearning: Bool { learning != nil }

    /// The instant (monotonic ns) at or after `earliest` to start the stream so its frames
    /// fall on the slots of a grid that has a slot at `slotMonotonic` every `period` ns; nil
    /// when no start at this period has been measured yet.
    public func instant(earliest: UInt64, slotMonotonic: UInt64, period: UInt64) -> UInt64? {
        guard period > 0, let known = startOffset, known.period == period else { return nil }
        // Wanted: (start + offset) ≡ slot (mod period).
        let wantedPhase = (slotMonotonic % period + period - known.offset % period) % period
        let earliestPhase = earliest % period
        let wait = (wantedPhase + period - earliestPhase) % period
        return earliest + wait
    }

    /// Why a stream is not to be started on the grid now; nil when it may be.
    public static func refusal(streaming: Bool, recording: Bool, clockLocked: Bool) -> String? {
        if !streaming { return "it is not streaming (it starts on the grid when asked again while it streams)" }
        if recording { return "a take is recording it, and a restart would lose frames of the take: align it before the take" }
        if !clockLocked { return "the node's clock is not locked, so the grid's slots are not known well enough here" }
        return nil
    }

    /// The circular mean of `offsets` in [0, period): offsets either side of zero average to
    /// near zero, not to half a period.
    static func circularMean(_ offsets: [UInt64], period: UInt64) -> UInt64 {
        guard !offsets.isEmpty, period > 0 else { return 0 }
        let scale = 2 * Double.pi / Double(period)
        let sine = offsets.reduce(0.0) { $0 + sin(Double($1) * scale) }
        let cosine = offsets.reduce(0.0) { $0 + cos(Double($1) * scale) }
        var angle = atan2(sine, cosine)
        if angle < 0 { angle += 2 * Double.pi }
        return UInt64((angle / scale).rounded()) % period
    }
}
