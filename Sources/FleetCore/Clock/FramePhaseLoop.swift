/// Steers a sensor's frame length so that its exposures start on their slots of the fleet
/// grid, as `rpicam-vid --sync` steers frame durations from a shared timing signal: the
/// sensor free-runs on its own oscillator, and the loop nudges each frame's length (VBLANK)
/// by a bounded amount so that the rate never jumps and a few seconds bring the phase in.
///
/// Events in, commands out, no I/O and no clock: each frame's start of exposure, measured in
/// fleet time, goes in with the grid; out comes the frame length for the next frame the
/// sensor has not latched yet. A phase-locked loop in two parts:
/// - frequency (the integral part): the line time in fleet ns is learnt by a least-squares fit
///   of exposure starts against the lines the sensor counted, so an oscillator 100 ppm off (or
///   a host clock that is) leaves no standing phase error;
/// - phase (the proportional part): where the exposures really start is estimated by taking a
///   share (`measurementGain`) of each frame's surprise, so one frame's jitter moves it little;
///   the next frame's length then brings that estimate onto its slot, to the nearest line,
///   within `maximumCorrection` of the interval.
/// Whole lines are the limit: a frame can be placed to half a line time of its slot.
///
/// Timing assumed, as on sensors that latch registers at frame start: a command issued once
/// frame n has been observed applies from frame n + 1, so frame n's own length, already
/// latched, is the one commanded before. Frames missed by the caller keep the last length.
public struct FramePhaseLoop: Sendable {
    public struct Configuration: Sendable, Equatable {
        /// Line time in ns from PIXEL_RATE and HBLANK; where the learning starts.
        public var nominalLineTime: Double
        /// Frame lengths in lines that VBLANK allows.
        public var frameLengthRange: ClosedRange<Int>
        /// Largest difference of a frame's duration from the grid interval, as a share of it.
        public var maximumCorrection: Double = 0.02
        /// Share of a frame's distance from where it was expected that moves the phase
        /// estimate: lower passes less jitter on and follows small steps more slowly.
        public var measurementGain: Double = 0.2
        /// Within this of its slot (ns), a frame is in phase.
        public var lockTolerance: UInt64 = 100_000
        /// Consecutive frames in phase that make a lock.
        public var lockFrames: Int = 10
        /// Consecutive frames out of phase that lose it: one late interrupt does not.
        public var unlockFrames: Int = 3
        /// A frame this far (ns) from where the fit expected it is a step (a restarted
        /// stream, a clock stepped): the fit starts over, the line time learnt stays.
        public var stepThreshold: UInt64 = 1_000_000
        /// Frames the line-time fit spans.
        public var frequencyWindow: Int = 128

        public init(nominalLineTime: Double, frameLengthRange: ClosedRange<Int>) {
            self.nominalLineTime = nominalLineTime
            self.frameLengthRange = frameLengthRange
        }

        /// For a sensor in `mode` with HBLANK at `horizontalBlanking`.
        public init(mode: SensorMode, horizontalBlanking: Int) {
            self.init(nominalLineTime: mode.lineTime(horizontalBlanking: horizontalBlanking), frameLengthRange: mode.frameLengthRange)
        }
    }

    /// One frame as the caller measured it.
    public struct Observation: Sendable, Equatable {
        /// The driver's frame sequence; a gap is frames the caller did not see.
        public var sequence: UInt64
        /// Its start of exposure in fleet ns.
        public var exposureStart: UInt64

        public init(sequence: UInt64, exposureStart: UInt64) {
            self.sequence = sequence
            self.exposureStart = exposureStart
        }
    }

    public enum State: Sendable, Equatable {
        /// Pulling the phase in, or holding it while it is not yet in tolerance long enough.
        case locking
        /// In tolerance for `lockFrames` frames, and not out of it for `unlockFrames` since.
        case locked
        /// The grid's rate needs `neededFrameLength` lines of the line time learnt, outside
        /// what VBLANK allows: the sensor runs as near the rate as it can, unaligned.
        case unsteerable(neededFrameLength: Double, range: ClosedRange<Int>)

        /// The same state, whatever the figures it carries (the length needed moves as the
        /// line time is learnt; that is no change of state).
        public func isSameState(as other: State) -> Bool {
            switch (self, other) {
            case (.locking, .locking), (.locked, .locked), (.unsteerable, .unsteerable): true
            default: false
            }
        }
    }

    /// What to set: VBLANK = `frameLengthLines` − the mode's height, from `appliesFrom`.
    public struct Command: Sendable, Equatable {
        public var frameLengthLines: Int
        public var appliesFrom: UInt64
        /// That frame's duration in fleet ns with the line time learnt.
        public var frameDuration: Double
        public var state: State
        /// The state is another than after the previous observation: the moment to say so once.
        public var stateChanged: Bool
    }

    /// A stretch out of phase: from the first frame out of tolerance (or the first frame
    /// seen) to the first of the run of frames in tolerance that locked again.
    public struct OutOfPhaseSpell: Sendable, Equatable {
        /// Fleet ns.
        public var start: UInt64
        public var end: UInt64
        public var frames: UInt64
        public var duration: UInt64 { end &- start }
    }

    public let configuration: Configuration
    public private(set) var state: State = .locking
    /// Fleet ns per line of this sensor, learnt.
    public private(set) var lineTime: Double
    public private(set) var lastOutOfPhase: OutOfPhaseSpell?
    /// Where the current spell out of phase began, while there is one.
    public private(set) var outOfPhaseSince: (time: UInt64, sequence: UInt64)?

    private var grid: FrameGrid?
    /// Lengths commanded, each from a sequence on, oldest first; the first from 0.
    private var commands: [(from: UInt64, lines: Int)]
    /// The last frame seen: where its exposure is estimated to have started (fleet ns, jitter
    /// smoothed out) and the lines the sensor counted up to it since the fit began.
    private var estimate: (sequence: UInt64, exposureStart: UInt64, lines: Int64)?
    private var fit = LineTimeFit()
    private var inPhaseRun: (count: Int, time: UInt64, sequence: UInt64)?
    private var outOfPhaseRun: (count: Int, time: UInt64, sequence: UInt64)?

    /// `currentFrameLength`: the frame length the sensor runs at now (height + VBLANK).
    public init(configuration: Configuration, currentFrameLength: Int) {
        self.configuration = configuration
        lineTime = configuration.nominalLineTime
        commands = [(0, currentFrameLength)]
    }

    /// The oscillator's error as learnt, in ppm of the nominal rate; positive is fast.
    public var frequencyErrorPPM: Double { (configuration.nominalLineTime / lineTime - 1) * 1e6 }

    /// The frame `observation` was measured; returns the length for the next frame.
    public mutating func observe(_ observation: Observation, on grid: FrameGrid) -> Command {
        let before = state
        if grid != self.grid {
            // A new grid (or the first): earlier phases say nothing about it.
            self.grid = grid
            if outOfPhaseSince == nil { startSpell(at: observation) }
            state = .locking
            inPhaseRun = nil
        }
        learn(from: observation)
        let phase = grid.phase(of: observation.exposureStart)

        let interval = Double(grid.interval)
        let range = configuration.frameLengthRange
        let needed = interval / lineTime
        let lines: Int
        if Self.outside(needed, range) {
            if outOfPhaseSince == nil { startSpell(at: observation) }
            state = .unsteerable(neededFrameLength: needed, range: range)
            inPhaseRun = nil
            outOfPhaseRun = nil
            lines = needed.isFinite ? range.clamp(Int64(needed.rounded())) : length(of: observation.sequence)
        } else {
            if case .unsteerable = state { state = .locking }
            track(phase, of: observation)
            lines = steer(after: observation, grid: grid)
        }
        commands.append((observation.sequence + 1, lines))
        return Command(
            frameLengthLines: lines, appliesFrom: observation.sequence + 1, frameDuration: Double(lines) * lineTime,
            state: state, stateChanged: !state.isSameState(as: before))
    }

    /// The length for frame n + 1, so that frame n + 2 starts on its slot.
    private func steer(after observation: Observation, grid: FrameGrid) -> Int {
        let interval = Double(grid.interval)
        let range = configuration.frameLengthRange
        guard let estimate else { return length(of: observation.sequence) }
        // Frame n + 1 starts where frame n's latched length takes it.
        let nextStart = estimate.exposureStart &+ UInt64(bitPattern: Int64((Double(length(of: observation.sequence)) * lineTime).rounded()))
        var heading = Double(grid.phase(of: nextStart))
        let limit = configuration.maximumCorrection * interval
        let shortest = max(-limit, Double(range.lowerBound) * lineTime - interval)
        let longest = min(limit, Double(range.upperBound) * lineTime - interval)
        // A sensor at the end of its range can move only one way: clearly late with no frame
        // to shorten, it makes for the next slot instead (and early, the previous one).
        let tolerance = Double(configuration.lockTolerance)
        if heading > tolerance, shortest > -lineTime { heading -= interval }
        if heading < -tolerance, longest < lineTime { heading += interval }
        let correction = min(max(-heading, shortest), longest)
        return range.clamp(Int64(((interval + correction) / lineTime).rounded()))
    }

    /// Moves the phase estimate towards where the frame started, and learns the line time
    /// from where it started against the lines counted since.
    private mutating func learn(from observation: Observation) {
        let measured = observation.exposureStart
        var lines: Int64 = 0
        var start = measured
        if let estimate, observation.sequence <= estimate.sequence || observation.sequence - estimate.sequence > Self.longestGap {
            // The stream started again (or was lost so long that it might have): its count
            // and its timeline are new.
            commands = [(0, commands[commands.count - 1].lines)]
            fit.removeAll()
        } else if let estimate {
            var counted: Int64 = 0
            for sequence in estimate.sequence..<observation.sequence { counted += Int64(length(of: sequence)) }
            lines = estimate.lines + counted
            let expected = estimate.exposureStart &+ UInt64(bitPattern: Int64((Double(counted) * lineTime).rounded()))
            let surprise = Int64(bitPattern: measured &- expected)
            if surprise.magnitude > configuration.stepThreshold {
                fit.removeAll()
            } else {
                start = expected &+ UInt64(bitPattern: Int64((Double(surprise) * configuration.measurementGain).rounded()))
            }
        }
        estimate = (observation.sequence, start, lines)
        // Lengths before frame n are history now.
        while commands.count > 1, commands[1].from <= observation.sequence { commands.removeFirst() }
        fit.append(lines: lines, time: measured, window: configuration.frequencyWindow)
        // A fit that wanders far from the nominal rate is fitting a step, not an oscillator.
        if let slope = fit.slope, abs(slope / configuration.nominalLineTime - 1) < Self.plausibleFrequencyError {
            lineTime = slope
        }
    }

    /// Moves between locking and locked by how far this frame was from its slot.
    private mutating func track(_ phase: Int64, of observation: Observation) {
        let inPhase = phase.magnitude <= configuration.lockTolerance
        let here = (count: 1, time: observation.exposureStart, sequence: observation.sequence)
        if inPhase {
            outOfPhaseRun = nil
            inPhaseRun = inPhaseRun.map { ($0.count + 1, $0.time, $0.sequence) } ?? here
        } else {
            inPhaseRun = nil
            outOfPhaseRun = outOfPhaseRun.map { ($0.count + 1, $0.time, $0.sequence) } ?? here
        }
        switch state {
        case .locking:
            guard let run = inPhaseRun, run.count >= configuration.lockFrames else { return }
            state = .locked
            if let since = outOfPhaseSince {
                lastOutOfPhase = OutOfPhaseSpell(start: since.time, end: run.time, frames: run.sequence - since.sequence)
                outOfPhaseSince = nil
            }
        case .locked:
            guard let run = outOfPhaseRun, run.count >= configuration.unlockFrames else { return }
            state = .locking
            outOfPhaseSince = (run.time, run.sequence)
        case .unsteerable:
            break
        }
    }

    private mutating func startSpell(at observation: Observation) {
        outOfPhaseSince = (observation.exposureStart, observation.sequence)
    }

    /// The length frame `sequence` was latched with: the last commanded from it or before.
    private func length(of sequence: UInt64) -> Int {
        commands.last(where: { $0.from <= sequence })?.lines ?? commands[0].lines
    }

    /// Outside the range, with a little room at the ends: a fit a few ppm off an exact end
    /// (a sensor whose fastest mode is the grid's rate) must not flicker to unsteerable.
    private static func outside(_ needed: Double, _ range: ClosedRange<Int>) -> Bool {
        let slack = needed * 5e-6
        return needed < Double(range.lowerBound) - slack || needed > Double(range.upperBound) + slack
    }

    /// Frames missed beyond this are not counted one by one: the stream is taken as new.
    static let longestGap: UInt64 = 10_000

    /// Crystal oscillators are within ±100 ppm or so; a fit beyond this is not one.
    static let plausibleFrequencyError = 2e-3
}
