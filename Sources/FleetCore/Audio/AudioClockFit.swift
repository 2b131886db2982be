/// A microphone's clock against the host's (microphones.md, "The audio clock"): a straight
/// line through the capture times of its blocks against their place in the stream, by least
/// squares over the last `windowSeconds`. The line gives each block a capture time without the
/// jitter of when the driver happened to stamp it, the audio clock's rate (ppm from nominal),
/// and how far the raw stamps stray from the line (the jitter bound). A gap in the stream (an
/// overrun) starts the fit over. Pure: points in, figures out.
public struct AudioClockFit: Sendable {
    public let sampleRate: Int
    public let windowSeconds: Double
    /// (frame, ns) relative to `origin`, oldest first.
    private var points: [(frame: Double, time: Double)] = []
    private var head = 0
    private var origin: (frame: UInt64, time: UInt64)?
    /// The last fit: time = intercept + slope × (frame − origin.frame), in ns from origin.time.
    private var slope: Double
    private var intercept = 0.0
    private var fitted = false
    private var pointsSinceFit = 0
    public private(set) var jitterNanoseconds: UInt64 = 0
    public private(set) var restarts: UInt64 = 0

    /// `refitEvery`: points between two fits (a fit costs a pass over the window).
    public init(sampleRate: Int, windowSeconds: Double = 30, refitEvery: Int = 50) {
        self.sampleRate = max(sampleRate, 1)
        self.windowSeconds = windowSeconds
        self.refitEvery = max(refitEvery, 1)
        slope = 1e9 / Double(max(sampleRate, 1))
    }

    private let refitEvery: Int

    /// A block whose first frame, `frame` frames into the stream, was stamped at `timeNs`.
    public mutating func add(frame: UInt64, timeNs: UInt64) {
        guard let origin else {
            self.origin = (frame, timeNs)
            points = [(0, 0)]
            head = 0
            return
        }
        let x = Double(Int64(bitPattern: frame &- origin.frame))
        let y = Double(Int64(bitPattern: timeNs &- origin.time))
        points.append((x, y))
        // Forget what fell out of the window (kept in place; compacted now and then).
        let span = windowSeconds * Double(sampleRate)
        while head < points.count - 2, x - points[head].frame > span { head += 1 }
        if head > 4096 {
            points.removeFirst(head)
            head = 0
        }
        pointsSinceFit += 1
        if !fitted || pointsSinceFit >= refitEvery || points.count - head < refitEvery { refit() }
    }

    /// The stream has a gap (samples lost): what follows is fitted anew.
    public mutating func restart() {
        if origin != nil { restarts += 1 }
        origin = nil
        points = []
        head = 0
        fitted = false
        jitterNanoseconds = 0
        slope = 1e9 / Double(sampleRate)
    }

    /// The fitted capture time of frame `frame`; nil before the first point.
    public func time(ofFrame frame: UInt64) -> UInt64? {
        guard let origin else { return nil }
        let x = Double(Int64(bitPattern: frame &- origin.frame))
        let offset = intercept + slope * x
        return offset >= 0 ? origin.time &+ UInt64(offset.rounded()) : origin.time &- UInt64((-offset).rounded())
    }

    /// Seconds the current window spans.
    public var fittedSeconds: Double {
        guard points.count - head >= 2, let last = points.last else { return 0 }
        return (last.frame - points[head].frame) / Double(sampleRate)
    }

    /// Frames per second of the host's clock against the nominal rate, in parts per million;
    /// nil until the window spans two seconds.
    public var ratePPM: Double? {
        guard fitted, fittedSeconds >= 2 else { return nil }
        let measuredRate = 1e9 / slope
        return (measuredRate / Double(sampleRate) - 1) * 1e6
    }

    private mutating func refit() {
        pointsSinceFit = 0
        let window = points[head...]
        let n = Double(window.count)
        guard window.count >= 2 else {
            intercept = window.first?.time ?? 0
            fitted = true
            return
        }
        // Centred sums: exact enough over hours of samples.
        let meanX = window.reduce(0) { $0 + $1.frame } / n
        let meanY = window.reduce(0) { $0 + $1.time } / n
        var sxx = 0.0, sxy = 0.0
        for point in window {
            let dx = point.frame - meanX
            sxx += dx * dx
            sxy += dx * (point.time - meanY)
        }
        // A short window's slope is mostly its stamps' jitter: the nominal rate until two seconds.
        let nominal = 1e9 / Double(sampleRate)
        let span = (window.last?.frame ?? 0) - (window.first?.frame ?? 0)
        slope = sxx > 0 && span >= 2 * Double(sampleRate) ? sxy / sxx : nominal
        intercept = meanY - slope * meanX
        var worst = 0.0
        for point in window { worst = max(worst, abs(point.time - (intercept + slope * point.frame))) }
        jitterNanoseconds = UInt64(worst.rounded(.up))
        fitted = true
    }
}
