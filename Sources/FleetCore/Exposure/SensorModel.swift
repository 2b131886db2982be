/// A simulated raw image sensor, timed as a V4L2 sensor sub-device is: a free-running pixel
/// clock off its nominal rate by `frequencyErrorPPM`, lines of `width + HBLANK` pixels,
/// frames of `height + VBLANK` lines, and an exposure in lines that ends where the frame's
/// readout begins (line 0 of a rolling shutter). Controls set at some instant take effect at
/// the next frame boundary, as sensors latch their registers at the start of a frame.
///
/// Pure: the caller passes the true time (ns on one timeline, never going backwards) and the
/// model says which frames were read out by then and when each one really exposed. Each
/// frame's start carries a bounded, uniform jitter from a seeded source, so a run repeats.
public struct SensorModel: Sendable {
    /// One frame as the sensor produced it, in true time.
    public struct Frame: Sendable, Equatable {
        /// Counts every frame the sensor made from 0, as a driver's buffer sequence does.
        public var sequence: UInt64
        /// When line 0 began to integrate: the start of exposure.
        public var exposureStart: UInt64
        public var exposureDuration: UInt64
        /// When line 0 was read out: the frame boundary, where controls were latched.
        public var readoutStart: UInt64
        /// When the last active line was read out: from then on a driver can hand the frame over.
        public var readoutEnd: UInt64
        public var frameLengthLines: Int
        public var exposureLines: Int
        /// This frame's line time in true ns, the oscillator's error included.
        public var lineTime: Double
    }

    /// What the controls hold: the values set, latched by the sensor at a boundary.
    struct Settings: Sendable, Equatable {
        var verticalBlanking: Int
        var horizontalBlanking: Int
        var exposureLines: Int
    }

    public let mode: SensorMode
    public let frequencyErrorPPM: Double
    /// Largest shift of a frame's start from its oscillator-timed instant, ns.
    public let jitterBound: UInt64
    /// As last set; what the controls report before the sensor latches them.
    private(set) var settings: Settings
    /// What the frame in progress was latched with.
    private var latchedSettings: Settings
    /// Settings set at an instant, waiting for the first boundary at or after it.
    private var pending: [(at: UInt64, settings: Settings)] = []
    private var random: SplitMix
    private var sequence: UInt64 = 0
    /// The next frame's boundary as the oscillator times it: whole ns and a fraction, so that
    /// hours of non-integer line times do not round away.
    private var nextBoundary: UInt64
    private var nextBoundaryFraction: Double = 0
    private var nextJitter: Int64 = 0
    /// The frame whose boundary has passed, latched, waiting for its readout to end.
    private var latched: Frame?

    /// A sensor streaming from `start` (true ns) with VBLANK, HBLANK and exposure at
    /// their defaults: the lowest blanking (the mode's fastest rate) and half the frame.
    public init(mode: SensorMode, frequencyErrorPPM: Double = 0, jitterBound: UInt64 = 0, seed: UInt64 = 1, start: UInt64) {
        self.mode = mode
        self.frequencyErrorPPM = frequencyErrorPPM
        self.jitterBound = jitterBound
        let frameLength = mode.frameLengthRange.lowerBound
        settings = Settings(
            verticalBlanking: mode.verticalBlankingRange.lowerBound,
            horizontalBlanking: mode.horizontalBlankingRange.lowerBound,
            exposureLines: mode.exposureRange(frameLength: frameLength).clamp(frameLength / 2))
        latchedSettings = settings
        random = SplitMix(seed: seed)
        nextBoundary = start
        nextJitter = drawJitter()
    }

    /// The frame length in lines that VBLANK, as last set, gives.
    public var frameLengthLines: Int { mode.height + settings.verticalBlanking }

    /// The line time in ns that the controls, as last set, give on a perfect oscillator: what
    /// a driver can compute from PIXEL_RATE and HBLANK, and all a steering loop knows at first.
    public var nominalLineTime: Double { mode.lineTime(horizontalBlanking: settings.horizontalBlanking) }

    /// The controls as VIDIOC_QUERY_EXT_CTRL on the sub-device would list them.
    public var controls: [DeviceControl] {
        let frameLength = mode.height + settings.verticalBlanking
        let exposure = mode.exposureRange(frameLength: frameLength)
        let vblank = mode.verticalBlankingRange, hblank = mode.horizontalBlankingRange
        let pixelRate = Int64(mode.pixelRate)
        return [
            DeviceControl(
                id: SensorControlID.exposure.rawValue, name: SensorControlID.exposure.name, kind: .integer,
                minimum: Int64(exposure.lowerBound), maximum: Int64(exposure.upperBound), step: 1,
                defaultValue: Int64(exposure.clamp(frameLength / 2)), value: Int64(settings.exposureLines)),
            DeviceControl(
                id: SensorControlID.verticalBlanking.rawValue, name: SensorControlID.verticalBlanking.name, kind: .integer,
                minimum: Int64(vblank.lowerBound), maximum: Int64(vblank.upperBound), step: 1,
                defaultValue: Int64(vblank.lowerBound), value: Int64(settings.verticalBlanking)),
            DeviceControl(
                id: SensorControlID.horizontalBlanking.rawValue, name: SensorControlID.horizontalBlanking.name, kind: .integer,
                minimum: Int64(hblank.lowerBound), maximum: Int64(hblank.upperBound), step: 1,
                defaultValue: Int64(hblank.lowerBound), value: Int64(settings.horizontalBlanking),
                isReadOnly: hblank.lowerBound == hblank.upperBound),
            DeviceControl(
                id: SensorControlID.pixelRate.rawValue, name: SensorControlID.pixelRate.name, kind: .integer64,
                minimum: pixelRate, maximum: pixelRate, step: 1, defaultValue: pixelRate, value: pixelRate, isReadOnly: true),
        ]
    }

    /// Sets a control at true time `at`, clamped into its range as the V4L2 core clamps
    /// integer controls; returns the value taken. It applies from the first frame boundary
    /// at or after `at` (a frame already reported is never changed). A shorter frame narrows the
    /// exposure range, and a longer exposure than the new range allows is cut to fit.
    @discardableResult
    public mutating func set(_ control: SensorControlID, to value: Int64, at time: UInt64) throws(SensorControlError) -> Int64 {
        var next = settings
        switch control {
        case .pixelRate:
            throw .readOnly(control)
        case .horizontalBlanking where mode.horizontalBlankingRange.count == 1:
            throw .readOnly(control)
        case .horizontalBlanking:
            next.horizontalBlanking = mode.horizontalBlankingRange.clamp(value)
        case .verticalBlanking:
            next.verticalBlanking = mode.verticalBlankingRange.clamp(value)
        case .exposure:
            next.exposureLines = mode.exposureRange(frameLength: mode.height + next.verticalBlanking).clamp(value)
        }
        next.exposureLines = mode.exposureRange(frameLength: mode.height + next.verticalBlanking).clamp(Int64(next.exposureLines))
        settings = next
        pending.append((time, next))
        switch control {
        case .horizontalBlanking: return Int64(next.horizontalBlanking)
        case .verticalBlanking: return Int64(next.verticalBlanking)
        default: return Int64(next.exposureLines)
        }
    }

    /// The frames read out by true time `time`, in order: those whose last line was read by then.
    public mutating func frames(through time: UInt64) -> [Frame] {
        var frames: [Frame] = []
        while true {
            if latched == nil {
                guard boundaryWithJitter <= time else { break }
                latched = latchNext()
            }
            guard let frame = latched, frame.readoutEnd <= time else { break }
            frames.append(frame)
            latched = nil
        }
        return frames
    }

    /// The next frame, however far ahead of any time passed so far: for simulations that step
    /// frame by frame. Settings set later with an earlier time than its boundary miss it.
    public mutating func nextFrame() -> Frame {
        let frame = latched ?? latchNext()
        latched = nil
        return frame
    }

    private var boundaryWithJitter: UInt64 { nextBoundary &+ UInt64(bitPattern: nextJitter) }

    /// Crosses the next boundary: latches what was set before it and times the frame.
    private mutating func latchNext() -> Frame {
        let boundary = boundaryWithJitter
        if let last = pending.lastIndex(where: { $0.at <= boundary }) {
            latchedSettings = pending[last].settings
            pending.removeFirst(last + 1)
        }
        let current = latchedSettings
        let frameLength = mode.height + current.verticalBlanking
        // A fast oscillator (positive ppm) makes every line, and so every frame, shorter.
        let lineTime = mode.lineTime(horizontalBlanking: current.horizontalBlanking) / (1 + frequencyErrorPPM / 1e6)
        let exposure = UInt64((Double(current.exposureLines) * lineTime).rounded())
        let frame = Frame(
            sequence: sequence, exposureStart: boundary &- exposure, exposureDuration: exposure, readoutStart: boundary,
            readoutEnd: boundary &+ UInt64((Double(mode.height) * lineTime).rounded()), frameLengthLines: frameLength,
            exposureLines: current.exposureLines, lineTime: lineTime)
        // The oscillator's timeline runs on from the unjittered boundary: jitter moves one
        // frame's start, it does not accumulate.
        let length = Double(frameLength) * lineTime + nextBoundaryFraction
        let whole = length.rounded(.down)
        nextBoundary &+= UInt64(whole)
        nextBoundaryFraction = length - whole
        nextJitter = drawJitter()
        sequence += 1
        return frame
    }

    private mutating func drawJitter() -> Int64 {
        guard jitterBound > 0 else { return 0 }
        return Int64(random.next() % (2 * jitterBound + 1)) - Int64(jitterBound)
    }
}

extension ClosedRange<Int> {
    /// `value` moved into the range.
    func clamp<Value: BinaryInteger>(_ value: Value) -> Int {
        Int(Swift.min(Swift.max(Int64(value), Int64(lowerBound)), Int64(upperBound)))
    }
}
