#if canImport(Glibc)
    import Glibc
#endif

/// The coordinator's fleet time: nanoseconds since the Unix epoch as the coordinator's
/// wall clock read them when it started, advancing with its monotonic clock from then on,
/// so that it never steps while the coordinator runs (an NTP step of the wall clock does
/// not move it) and still reads as a date.
public struct FleetTimeSource: Sendable {
    /// Fleet time minus CLOCK_MONOTONIC.
    public let epochOffset: UInt64

    public init() {
        var wall = timespec()
        clock_gettime(CLOCK_REALTIME, &wall)
        let monotonic = MonotonicTime.now()
        epochOffset = UInt64(wall.tv_sec) * 1_000_000_000 + UInt64(wall.tv_nsec) &- monotonic
    }

    public func now() -> UInt64 { MonotonicTime.now() &+ epochOffset }

    /// Where this run's frame-alignment grid starts: a whole second of fleet time, fixed while
    /// the coordinator runs and the same for every device (proto-docs/clock.md, "Frame alignment").
    /// A restarted coordinator's fleet time has a new epoch, so it chooses the origin again.
    public var alignmentGridOrigin: UInt64 { epochOffset / 1_000_000_000 * 1_000_000_000 }
}

/// An agent's own clock: CLOCK_MONOTONIC, or for tests a clock deliberately off by `offset`
/// ns and running `driftPPM` fast, so the estimator can be checked against known truth
/// (every namespace on one machine shares one kernel clock). Capture times and clock probes
/// both read it.
public struct NodeClock: Sendable, Equatable {
    public var offset: Int64
    public var driftPPM: Double

    public static let system = NodeClock(offset: 0, driftPPM: 0)

    public init(offset: Int64, driftPPM: Double) {
        self.offset = offset
        self.driftPPM = driftPPM
    }

    public var isSkewed: Bool { offset != 0 || driftPPM != 0 }

    /// This clock's reading when CLOCK_MONOTONIC read `monotonic`.
    public func local(fromMonotonic monotonic: UInt64) -> UInt64 {
        guard isSkewed else { return monotonic }
        let gained = Int64((Double(monotonic) * driftPPM / 1e6).rounded())
        return monotonic &+ UInt64(bitPattern: offset &+ gained)
    }

    public func now() -> UInt64 { local(fromMonotonic: MonotonicTime.now()) }

    /// CLOCK_MONOTONIC when this clock reads `local` (inverse of `local(fromMonotonic:)`).
    public func monotonic(fromLocal local: UInt64) -> UInt64 {
        guard isSkewed else { return local }
        let unskewed = Double(Int64(bitPattern: local &- UInt64(bitPattern: offset)))
        return UInt64(max(0, (unskewed / (1 + driftPPM / 1e6)).rounded()))
    }

    /// This clock now, with the host's system clock (CLOCK_REALTIME) read beside it and
    /// skewed the same way, for reporting how far the host's wall clock is from fleet time.
    public func nowWithWallClock() -> (local: UInt64, wall: UInt64) {
        var wall = timespec()
        let monotonic = MonotonicTime.now()
        clock_gettime(CLOCK_REALTIME, &wall)
        let system = UInt64(wall.tv_sec) * 1_000_000_000 + UInt64(wall.tv_nsec)
        let local = local(fromMonotonic: monotonic)
        return (local, system &+ (local &- monotonic))
    }

    /// Parses the test setting "+3.2s,+40ppm" (either part may be left out; units s, ms,
    /// us, ns for the offset).
    public init?(testSetting text: String) {
        var offset: Int64 = 0
        var drift = 0.0
        for part in text.split(separator: ",").map({ String($0.filter { $0 != " " }) }) where !part.isEmpty {
            if part.hasSuffix("ppm"), let value = Double(part.dropLast(3)), value.isFinite, abs(value) < 1_000 {
                drift = value
                continue
            }
            let units: [(String, Double)] = [("ns", 1), ("us", 1e3), ("ms", 1e6), ("s", 1e9)]
            guard let (suffix, scale) = units.first(where: { part.hasSuffix($0.0) }),
                let value = Double(part.dropLast(suffix.count)), value.isFinite, abs(value * scale) < 1e17
            else { return nil }
            offset = Int64((value * scale).rounded())
        }
        self.init(offset: offset, driftPPM: drift)
    }
}

/// The host's wall clock (CLOCK_REALTIME) in Unix milliseconds, for stamps people read
/// (the audit log, the index, reports): the one place the daemons read it. Services are
/// handed one, so that a test chooses the time.
public struct WallClock: Sendable {
    public let unixMilliseconds: @Sendable () -> Int64

    public init(unixMilliseconds: @escaping @Sendable () -> Int64) {
        self.unixMilliseconds = unixMilliseconds
    }

    /// A clock that always reads `milliseconds` (tests).
    public static func fixed(_ milliseconds: Int64) -> WallClock { WallClock { milliseconds } }

    public static let system = WallClock {
        var wall = timespec()
        clock_gettime(CLOCK_REALTIME, &wall)
        return Int64(wall.tv_sec) * 1000 + Int64(wall.tv_nsec) / 1_000_000
    }
}
