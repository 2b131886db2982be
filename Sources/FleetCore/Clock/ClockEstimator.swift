/// Estimates a node clock's offset and frequency error against fleet time from NTP-style
/// probes, as a pure state machine: the shell feeds it probes and the time, and asks it when
/// to probe next and how to convert. No I/O; time comes in with every call.
///
/// Queueing only ever adds delay, so each direction of the path has a floor: the quickest a
/// probe can go. Once enough probes are kept, the estimate rests on those floors, each
/// direction on its own: a line along the latest arrivals' lower envelope (inbound) and the
/// earliest-looking departures' upper envelope (outbound), through the extreme probe of each
/// stretch of the window. Where the two floors are equal (the same path both ways), their
/// midline is the clock's offset, whatever the jitter does to single probes; averaging whole
/// probes instead leaves half the jitter's difference between directions in every point.
/// Until then (and to find the extremes) a straight line through the quickest round trips'
/// offsets, outliers dropped, gives offset and drift. The error bound is half the best round
/// trip (the most an asymmetric path can hide) plus three standard errors of the fit,
/// widening with distance from the newest probe.
public struct ClockEstimator: Sendable {
    public struct Configuration: Sendable, Equatable {
        /// Probes kept (the newest): about four minutes once locked. The floors rest on the
        /// quickest of them, so the count matters more than the span: a third as many doubles
        /// the p99 error on a jittery link.
        public var window = 1024
        /// Stretches of the window whose extreme probes the floor lines go through, and the
        /// probes each needs at least. Long stretches find the floor: on a host busy sending
        /// video, the outbound delay's low percentiles sit well above its floor.
        public var envelopeStretches = 8
        public var probesPerStretch = 8
        /// Share of the kept probes, quickest first, that the fit uses.
        public var quickestShare = 0.5
        /// Probes (after filtering) and time span needed before the estimate is locked.
        public var probesForLock = 24
        public var lockSpanNanoseconds: UInt64 = 1_000_000_000
        /// Probe interval until locked and while the window fills to an eighth, then once
        /// locked at the fastest. More probes sharpen the floors (at 250 ms the clean-link
        /// median error was 10–21 µs in the bench, at 100 ms 3–8 µs), but every one is two
        /// CURVE round trips and a refit on the agent and two answers on the coordinator, so
        /// a large fleet probes at the coordinator's slower pace (clock.md, "Pace").
        public var acquiringInterval: UInt64 = 50_000_000
        public var lockedInterval: UInt64 = 100_000_000
        /// The slowest pace while the window fills to half, and the pace when the coordinator
        /// does not say one (before protocol 1.4): a fleet of hundreds joining at once probes
        /// four pairs a second each, not ten.
        public var fillingInterval: UInt64 = 250_000_000
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
        state == .locked && probes.count >= configuration.window / 8 ? configuration.lockedInterval : configuration.acquiringInterval
    }

    /// How long to wait before the next probe when the coordinator asks for `coordinatorPace`
    /// (clock.md, "Pace"; 0: it does not say): its pace once locked with the window half full,
    /// never faster than this estimator's own and never beyond a quarter of the time after
    /// which an estimate is stale. Until the window is half full the coordinator's pace is
    /// taken only up to `fillingInterval`: a 1 s pace from the lock on left the bench's first
    /// 90 s at p99 123 µs against about 40.
    public func probeInterval(coordinatorPace: UInt64) -> UInt64 {
        let own = probeInterval
        guard own >= configuration.lockedInterval else { return own }
        guard coordinatorPace > 0 else { return max(own, configuration.fillingInterval) }
        let slowest = probes.count >= configuration.window / 2 ? configuration.staleAfterNanoseconds / 4 : configuration.fillingInterval
        return max(own, min(coordinatorPace, slowest))
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
            next =
                fresh && estimate.probesUsed >= configuration.probesForLock && span >= configuration.lockSpanNanoseconds
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
        var used = chosen.count
        if driftKnown, let floors = floorLines(reference: reference, baseOffset: baseOffset, slope: line.slope) {
            line = floors
            used = probes.count
        }
        let slope = driftKnown ? line.slope : 0
        let slopeError = driftKnown ? line.slopeStandardError : configuration.unknownDriftPPM * 1_000
        let mapping = FleetClockMapping(
            referenceLocal: reference,
            offset: baseOffset &+ Int64(line.value(at: 0).rounded()),
            driftPPM: slope / 1_000,
            uncertaintyAtReference: Double(best) / 2 + 3 * line.interceptStandardError,
            uncertaintyGrowthPerSecond: 3 * slopeError + configuration.wanderPPM * 1_000)
        return Estimate(
            state: state, mapping: mapping, bestDelay: best, latestDelay: newest.delay,
            probesUsed: used, probesKept: probes.count)
    }
}

extension ClockEstimator {
    /// The offset line along both directions' floors (see the type's comment), or nil while
    /// too few probes are kept. `slope` is a first guess at the drift, ns/s, to pick each
    /// stretch's extremes by; the floors' own slope then picks them again.
    fileprivate func floorLines(reference: UInt64, baseOffset: Int64, slope: Double) -> Line? {
        let stretches = min(configuration.envelopeStretches, probes.count / configuration.probesPerStretch)
        guard stretches >= 2 else { return nil }
        // Per probe: x (s from the reference), the outbound and inbound offsets relative to
        // the newest probe's (outbound = θ − delay up, inbound = θ + delay down, θ = local − fleet).
        let points = probes.map { probe -> (x: Double, outbound: Double, inbound: Double) in
            (
                Double(Int64(bitPattern: probe.localMidpoint &- reference)) / 1e9,
                Double(Int64(bitPattern: probe.sent &- probe.serverReceived) &- baseOffset),
                Double(Int64(bitPattern: probe.received &- probe.serverSent) &- baseOffset)
            )
        }
        var fitted: Line?
        var guess = slope
        for _ in 0..<2 {
            var extremes: [(x: Double, y: Double, side: Double)] = []
            for stretch in 0..<stretches {
                let part = points[stretch * points.count / stretches..<(stretch + 1) * points.count / stretches]
                guard let top = part.max(by: { $0.outbound - guess * $0.x < $1.outbound - guess * $1.x }),
                    let bottom = part.min(by: { $0.inbound - guess * $0.x < $1.inbound - guess * $1.x })
                else { continue }
                extremes.append((top.x, top.outbound, -1))
                extremes.append((bottom.x, bottom.inbound, 1))
            }
            guard let line = Line.fitFloors(extremes) else { return fitted }
            fitted = line
            guess = line.slope
        }
        return fitted
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
        return Line(
            intercept: intercept, slope: slope,
            interceptStandardError: (variance * (1 / n + meanX * meanX / sxx)).squareRoot(),
            slopeStandardError: (variance / sxx).squareRoot())
    }

    private static func pow2(_ value: Double) -> Double { value * value }

    /// The floors' midline: y = intercept + slope·x + side·halfWidth by least squares, side −1
    /// for the outbound envelope and +1 for the inbound one. Standard errors from the
    /// residuals, as for `fit`; nil if the points do not pin the three down.
    static func fitFloors(_ points: [(x: Double, y: Double, side: Double)]) -> Line? {
        guard points.count >= 5 else { return nil }
        // Normal equations for (intercept, slope, halfWidth), centred on the mean x.
        let n = Double(points.count)
        let meanX = points.reduce(0) { $0 + $1.x } / n
        var m = [[Double]](repeating: [Double](repeating: 0, count: 3), count: 3)
        var v = [Double](repeating: 0, count: 3)
        for point in points {
            let row = [1, point.x - meanX, point.side]
            for i in 0..<3 {
                v[i] += row[i] * point.y
                for j in 0..<3 { m[i][j] += row[i] * row[j] }
            }
        }
        guard let solution = solve3(m, v), let inverse = invert3(m) else { return nil }
        let residual = points.reduce(0) { $0 + pow2($1.y - (solution[0] + solution[1] * ($1.x - meanX) + solution[2] * $1.side)) }
        let variance = residual / max(n - 3, 1)
        // Back to an intercept at x = 0: intercept − slope·meanX, its variance with the covariance.
        let interceptVariance = variance * (inverse[0][0] - 2 * meanX * inverse[0][1] + meanX * meanX * inverse[1][1])
        return Line(
            intercept: solution[0] - solution[1] * meanX, slope: solution[1],
            interceptStandardError: max(interceptVariance, 0).squareRoot(),
            slopeStandardError: max(variance * inverse[1][1], 0).squareRoot())
    }

    private static func determinant3(_ m: [[Double]]) -> Double {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    }

    private static func solve3(_ m: [[Double]], _ v: [Double]) -> [Double]? {
        let d = determinant3(m)
        guard d.isNormal else { return nil }
        return (0..<3).map { column in
            var replaced = m
            for row in 0..<3 { replaced[row][column] = v[row] }
            return determinant3(replaced) / d
        }
    }

    private static func invert3(_ m: [[Double]]) -> [[Double]]? {
        let d = determinant3(m)
        guard d.isNormal else { return nil }
        func minor(_ r: Int, _ c: Int) -> Double {
            let rows = (0..<3).filter { $0 != r }, cols = (0..<3).filter { $0 != c }
            return m[rows[0]][cols[0]] * m[rows[1]][cols[1]] - m[rows[0]][cols[1]] * m[rows[1]][cols[0]]
        }
        return (0..<3).map { i in (0..<3).map { j in (((i + j) % 2 == 0) ? 1 : -1) * minor(j, i) / d } }
    }
}
