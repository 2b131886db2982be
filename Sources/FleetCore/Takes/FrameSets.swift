import Foundation

/// One frame of a take as its files give it: the device's sequence number and the fleet time
/// (ns) it was captured at.
public struct FrameTime: Sendable, Equatable {
    public var sequence: UInt64
    public var fleetTime: UInt64

    public init(sequence: UInt64, fleetTime: UInt64) {
        self.sequence = sequence
        self.fleetTime = fleetTime
    }
}

/// Frame sets of a take (proto-docs/recordings.md, "Frame sets"): for each slot of a grid,
/// the nearest frame of every camera, with its offset from the slot, and whether the set's
/// spread is within a tolerance. What motion-capture and reconstruction pipelines read to
/// pair the frames of cameras that run free.
///
/// Slots are `interval` apart. Their place is the fleet's grid moved by the cameras' mean
/// phase on it (a circular mean over every frame): steered cameras leave it on the grid,
/// free-running ones put it in the middle of their frames, so that no camera's frames sit
/// on the boundary between two slots and jitter across it. Each frame belongs to the slot
/// within half an interval of it; where a camera has several there (it runs faster), the
/// nearest is in the set and the others are not paired.
///
/// An iterator: one set at a time, in slot order, so a long take is never held as sets.
public struct FrameSetMaker: IteratorProtocol, Sendable {
    public struct Member: Sendable, Equatable {
        /// The camera's index in the cameras the maker was given.
        public var camera: Int
        public var sequence: UInt64
        public var fleetTime: UInt64
        /// The frame's fleet time minus its slot's: negative is early.
        public var offset: Int64
    }

    public struct FrameSet: Sendable, Equatable {
        public var slot: UInt64
        /// The cameras with a frame in this slot, in camera order.
        public var members: [Member]
        /// Latest member's fleet time minus the earliest's (0 with fewer than two).
        public var spread: UInt64
        /// Every camera has a frame in it.
        public var complete: Bool
        /// Its spread is above the tolerance.
        public var overTolerance: Bool
    }

    public struct CameraSummary: Sendable, Equatable {
        public var frames = 0
        /// Frames in a set: the nearest of their camera in their slot.
        public var paired = 0
        /// Slots without a frame of this camera.
        public var missing = 0
        /// |offset| of the paired frames from their slots.
        public var offset = MagnitudeHistogram()
    }

    public struct Summary: Sendable, Equatable {
        public var sets = 0
        public var complete = 0
        /// Sets (of two or more frames) whose spread is above the tolerance.
        public var overTolerance = 0
        /// Spread of the complete sets.
        public var spread = MagnitudeHistogram()
        public var cameras: [CameraSummary]
    }

    public let interval: UInt64
    public let tolerance: UInt64
    /// Where the slots are: `gridOrigin` moved by the cameras' mean phase.
    public let slotOrigin: UInt64
    /// The slots' shift from the fleet's grid (the cameras' mean phase on it), ns.
    public let slotShift: Int64
    public private(set) var summary: Summary

    private let cameras: [[FrameTime]]
    private var cursors: [Int]
    private var nextSlot: UInt64
    private let lastSlot: UInt64

    /// `cameras`: each camera's frames in capture order. `gridOrigin` and `interval` are the
    /// fleet's frame grid (its origin 0 when unknown); `tolerance` the spread a set may have.
    public init(cameras: [[FrameTime]], gridOrigin: UInt64, interval: UInt64, tolerance: UInt64) {
        let interval = max(interval, 1)
        let sorted = cameras.map { frames in
            zip(frames, frames.dropFirst()).allSatisfy { $0.fleetTime <= $1.fleetTime } ? frames : frames.sorted { $0.fleetTime < $1.fleetTime }
        }
        let shift = Self.meanPhase(of: sorted, on: FrameGrid(origin: gridOrigin, interval: interval))
        let origin = UInt64(bitPattern: Int64(bitPattern: gridOrigin) &+ shift)
        let grid = FrameGrid(origin: origin, interval: interval)
        func slot(of time: UInt64) -> UInt64 { UInt64(bitPattern: Int64(bitPattern: time) &- grid.phase(of: time)) }
        let firsts = sorted.compactMap(\.first?.fleetTime)
        let lasts = sorted.compactMap(\.last?.fleetTime)
        self.cameras = sorted
        self.interval = interval
        self.tolerance = tolerance
        slotOrigin = origin
        slotShift = shift
        cursors = Array(repeating: 0, count: sorted.count)
        summary = Summary(cameras: sorted.map { CameraSummary(frames: $0.count) })
        if let first = firsts.min(), let last = lasts.max() {
            nextSlot = slot(of: first)
            lastSlot = slot(of: last)
        } else {
            nextSlot = 1
            lastSlot = 0
        }
    }

    public mutating func next() -> FrameSet? {
        guard nextSlot <= lastSlot else { return nil }
        let slot = nextSlot
        nextSlot += interval
        let low = slot - interval / 2  // the slot holds (slot - interval/2, slot + interval/2]
        let high = slot + (interval - interval / 2)
        var members: [Member] = []
        for camera in cameras.indices {
            let frames = cameras[camera]
            var index = cursors[camera]
            var nearest: Member?
            while index < frames.count, frames[index].fleetTime <= high {
                let frame = frames[index]
                index += 1
                guard frame.fleetTime > low else { continue }  // before the first slot: none
                let offset = Int64(bitPattern: frame.fleetTime &- slot)
                if nearest == nil || offset.magnitude < nearest!.offset.magnitude {
                    nearest = Member(camera: camera, sequence: frame.sequence, fleetTime: frame.fleetTime, offset: offset)
                }
            }
            cursors[camera] = index
            if let nearest {
                members.append(nearest)
                summary.cameras[camera].paired += 1
                summary.cameras[camera].offset.add(nearest.offset.magnitude)
            } else {
                summary.cameras[camera].missing += 1
            }
        }
        let times = members.map(\.fleetTime)
        let spread = (times.max() ?? 0) - (times.min() ?? 0)
        let complete = members.count == cameras.count
        let over = members.count >= 2 && spread > tolerance
        summary.sets += 1
        if complete {
            summary.complete += 1
            summary.spread.add(spread)
        }
        if over { summary.overTolerance += 1 }
        return FrameSet(slot: slot, members: members, spread: spread, complete: complete, overTolerance: over)
    }

    /// Runs through every set, keeping only the summary.
    public mutating func finish() -> Summary {
        while next() != nil {}
        return summary
    }

    /// The circular mean of every frame's phase on `grid`, ns in (−interval/2, interval/2]:
    /// the middle of where the cameras' frames fall in their slots. At most 10,000 frames of
    /// each camera, evenly spread over its take, go in.
    static func meanPhase(of cameras: [[FrameTime]], on grid: FrameGrid) -> Int64 {
        var x = 0.0
        var y = 0.0
        for frames in cameras where !frames.isEmpty {
            let step = max(1, frames.count / 10_000)
            for index in stride(from: 0, to: frames.count, by: step) {
                let angle = 2 * Double.pi * Double(grid.phase(of: frames[index].fleetTime)) / Double(grid.interval)
                x += cos(angle) / Double((frames.count + step - 1) / step)
                y += sin(angle) / Double((frames.count + step - 1) / step)
            }
        }
        guard x != 0 || y != 0 else { return 0 }
        let phase = Int64((atan2(y, x) / (2 * Double.pi) * Double(grid.interval)).rounded())
        let half = Int64(grid.interval / 2)
        return phase <= -half ? phase + Int64(grid.interval) : phase
    }
}
