/// Estimates a node clock's offset and frequency error against fleet time from NTP-style
/// probes, as a pure state machine: the shell feeds it probes and the time, and asks it when
/// to probe next and how to convert. No I/O; time comes in with every call.
///
/// Of the recent probes it keeps, only the quickest round trips count (queueing only ever
/// adds delay, and makes it lopsided), outliers among those are dropped, and a straight line
/// through their offsets gives the offset now and the drift. The error bound is half the
/// best round trip (the most an asymmetric path can hide) plus three standard errors of
/// the fit, widening with distance from the newest probe.
public struct ClockEstimator: Sendable {
    public struct Configuration: Sendable, Equatable {
        /// Probes kept (the newest): about two minutes once locked, enough to pin the drift
        /// down to a tenth of a ppm on a LAN.
        public var window = 256
        /// Share of the kept probes, quickest first, that the fit uses.
        public var quickestShare = 0.5
        /// Probes (after filtering) and time span needed before the estimate is locked.
        public var probesForLock = 8
        public var lockSpanNanoseconds: UInt64 = 1_000_000_000
        /// Probe interval until locked, and once locked.
        public var acquiringInterval: UInt64 = 100_000_000
        public var lockedInterval: UInt64 = 500_000_000
        /// Without a usable probe for this long, the estimate is no longer locked.
        public var staleAfterNanoseconds: UInt64 = 10_000_000_000
        /// Round trips beyond this are not used at all.
        public var maximumDelayNanoseconds: Int64 = 1_000_000_000
        /// What a clock's frequency may wander between probes (temperature), ppm.
        public var wanderPPM = 0.1
        /// Assumed frequency error while the drift is not known yet, ppm.
        public var unknownDriftPPM = 100.0

        public init() {}
    }

    public enum State: String, Sendable, Equatable, CaseIterable {
        /// No usable probe yet.
        case unsynchronised
        /// An estimate exists but is not yet (or no longer) good enough to rely on.
        case synchronising
        case locked
    }

    /// What the estimator says now.
    public struct Estimate: Sendable, Equatable {
        public var state: State
        public var mapping: FleetClockMapping
        /// Round trip of the best probe the estimate rests on, and of the newest one, ns.
        public var bestDelay: Int64
        public var latestDelay: Int64
        /// Probes behind the estimate (after filtering) and kept.
        public var probesUsed: Int
        public var probesKept: Int
    }

    public let configuration: Configuration
    public private(set) var state: State = .unsynchronised
    public private(set) var estimate: Estimate?
    private var probes: [ClockProbe] = []
    private var lastProbeAt: UInt64?

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Takes one probe in; returns the state if it changed.
    @discardableResult
    public mutating func add(_ probe: ClockProbe) -> State? {
        guard probe.isPlausible, probe.delay <= configuration.maximumDelayNanoseconds else { return nil }
        probes.append(probe)
        if probes.count > configuration.window { probes.removeFirst(probes.count - configuration.window) }
        lastProbeAt = probe.received
        estimate = fit()
        return settle(now: probe.received)
    }

    /// Lets time pass without probes (lost or unanswered); returns the state if it changed.
    @discardableResult
    public mutating func tick(now: UInt64) -> State? { settle(now: now) }

    /// How long to wait before the next probe.
    public var probeInterval: UInt64 {
        state == .locked ? configuration.lockedInterval : configuration.acquiringInterval
    }

    /// Forgets everything (the coordinator, and so fleet time, changed).
    public mutating func reset() {
        probes.removeAll()
        estimate = nil
        lastProbeAt = nil
        state = .unsynchronised
    }

    private mutating func settle(now: UInt64) -> State? {
        let next: State
        if let estimate {
            let fresh = lastProbeAt.map { now <= $0 || now - $0 <= configuration.staleAfterNanoseconds } ?? false
            let span = (probes.last?.localMidpoint ?? 0) &- (probes.first?.localMidpoint ?? 0)
            next = fresh && estimate.probesUsed >= configuration.probesForLock && span >= configuration.lockSpanNanoseconds
                ? .locked : .synchronising
        } else {
            next = .unsynchronised
        }
        estimate?.state = next
        guard next != state else { return nil }
        state = next
        return next
    }

    /// A least-squares line through the quickest probes' offsets, refitted once without the
    /// outliers the first line shows up.
    private func fit() -> Estimate? {
        guard let newest = probes.last else { return nil }
        let quickest = probes.sorted { $0.delay < $1.delay }
        let count = min(quickest.count, max(min(quickest.count, 3), Int((Double(quickest.count) * configuration.quickestShare).rounded(.up))))
        var chosen = Array(quickest.prefix(count))
        // Offsets relative to the newest probe's, so the sums stay small in Double.
        let reference = newest.localMidpoint
        let baseOffset = newest.offset
        func points(_ set: [ClockProbe]) -> [(x: Double, y: Double)] {
            set.map { (Double(Int64(bitPattern: $0.localMidpoint &- reference)) / 1e9, Double($0.offset &- baseOffset)) }
        }
        var line = Line.fit(points(chosen))
        if chosen.count >= 5 {
            let residuals = points(chosen).map { abs($0.y - line.value(at: $0.x)) }
            let median = residuals.sorted()[residuals.count / 2]
            // 1.4826·MAD estimates σ; anything beyond 4σ (and 1 µs) is an outlier.
            let limit = max(4 * 1.4826 * median, 1_000)
            let kept = zip(chosen, residuals).filter { $0.1 <= limit }.map(\.0)
            if kept.count >= 3, kept.count < chosen.count {
                chosen = kept
                line = Line.fit(points(chosen))
            }
        }
        let best = chosen.map(\.delay).min() ?? newest.delay
        let span = (chosen.map(\.localMidpoint).max() ?? reference) &- (chosen.map(\.localMidpoint).min() ?? reference)
        let driftKnown = chosen.count >= 3 && span >= configuration.lockSpanNanoseconds / 2
        let slope = driftKnown ? line.slope : 0
        let slopeError = driftKnown ? line.slopeStandardError : configuration.unknownDriftPPM * 1_000
        let mapping = FleetClockMapping(
            referenceLocal: reference,
            offset: baseOffset &+ Int64(line.value(at: 0).rounded()),
            driftPPM: slope / 1_000,
            uncertaintyAtReference: Double(best) / 2 + 3 * line.interceptStandardError,
            uncertaintyGrowthPerSecond: 3 * slopeError + configuration.wanderPPM * 1_000)
        return Estimate(state: state, mapping: mapping, bestDelay: best, latestDelay: newest.delay,
                        probesUsed: chosen.count, probesKept: probes.count)
    }
}

/// y = intercept + slope·x by least squares, with the standard errors of both.
struct Line {
    var intercept: Double
    var slope: Double
    var interceptStandardError: Double
    var slopeStandardError: Double

    func value(at x: Double) -> Double { intercept + slope * x }

    static func fit(_ points: [(x: Double, y: Double)]) -> Line {
        let n = Double(points.count)
        guard points.count >= 2 else {
            return Line(intercept: points.first?.y ?? 0, slope: 0, interceptStandardError: 0, slopeStandardError: 0)
        }
        let meanX = points.reduce(0) { $0 + $1.x } / n
        let meanY = points.reduce(0) { $0 + $1.y } / n
        let sxx = points.reduce(0) { $0 + ($1.x - meanX) * ($1.x - meanX) }
        guard sxx > 0 else {
            let spread = points.reduce(0) { $0 + ($1.y - meanY) * ($1.y - meanY) }
            return Line(intercept: meanY, slope: 0, interceptStandardError: (spread / n).squareRoot() / n.squareRoot(), slopeStandardError: 0)
        }
        let sxy = points.reduce(0) { $0 + ($1.x - meanX) * ($1.y - meanY) }
        let slope = sxy / sxx
        let intercept = meanY - slope * meanX
        guard points.count > 2 else { return Line(intercept: intercept, slope: slope, interceptStandardError: 0, slopeStandardError: 0) }
        let residual = points.reduce(0) { $0 + pow2($1.y - (intercept + slope * $1.x)) }
        let variance = residual / (n - 2)
        return Line(intercept: intercept, slope: slope,
                    interceptStandardError: (variance * (1 / n + meanX * meanX / sxx)).squareRoot(),
                    slopeStandardError: (variance / sxx).squareRoot())
    }

    private static func pow2(_ value: Double) -> Double { value * value }
}
