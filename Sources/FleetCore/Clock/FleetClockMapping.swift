/// Converts between one node's monotonic clock and fleet time, the way a capture API
/// converts a timestamp from one clock to another: a line through a reference point, with
/// the node clock's frequency error as its slope, and an error bound that widens with
/// distance from the reference.
///
/// At local time `referenceLocal` the node's clock is `offset` ns ahead of fleet time; it
/// gains `driftPPM` millionths of a second per second on fleet time. Integer arithmetic
/// keeps full nanosecond precision for epoch-sized fleet times.
public struct FleetClockMapping: Sendable, Equatable {
    public var referenceLocal: UInt64
    /// local − fleet at `referenceLocal`, ns.
    public var offset: Int64
    /// The node clock's frequency error against fleet time, parts per million (+ = fast).
    public var driftPPM: Double
    /// Error bound at `referenceLocal`, ns.
    public var uncertaintyAtReference: Double
    /// How fast the bound widens away from the reference, ns per second.
    public var uncertaintyGrowthPerSecond: Double

    public init(
        referenceLocal: UInt64, offset: Int64, driftPPM: Double, uncertaintyAtReference: Double = 0,
        uncertaintyGrowthPerSecond: Double = 0
    ) {
        self.referenceLocal = referenceLocal
        self.offset = offset
        self.driftPPM = driftPPM
        self.uncertaintyAtReference = uncertaintyAtReference
        self.uncertaintyGrowthPerSecond = uncertaintyGrowthPerSecond
    }

    /// local − fleet at local time `local`, ns.
    public func offset(atLocal local: UInt64) -> Int64 {
        let elapsed = Double(Int64(bitPattern: local &- referenceLocal))
        return offset &+ Int64((elapsed * driftPPM / 1e6).rounded())
    }

    /// Fleet time of a moment the node's clock read `local`.
    public func fleetTime(atLocal local: UInt64) -> UInt64 {
        local &- UInt64(bitPattern: offset(atLocal: local))
    }

    /// The node's clock reading at fleet time `fleet` (inverse of `fleetTime(atLocal:)`).
    public func localTime(atFleet fleet: UInt64) -> UInt64 {
        // fleet = ref + L − offset − L·d  ⇒  L = (fleet − ref + offset) / (1 − d), d = drift/1e6
        let fleetOfReference = referenceLocal &- UInt64(bitPattern: offset)
        let sinceReference = Double(Int64(bitPattern: fleet &- fleetOfReference))
        let elapsedLocal = sinceReference / (1 - driftPPM / 1e6)
        return referenceLocal &+ UInt64(bitPattern: Int64(elapsedLocal.rounded()))
    }

    /// The error bound of `fleetTime(atLocal: local)`, ns.
    public func uncertainty(atLocal local: UInt64) -> Double {
        let seconds = abs(Double(Int64(bitPattern: local &- referenceLocal))) / 1e9
        return uncertaintyAtReference + uncertaintyGrowthPerSecond * seconds
    }

    /// This node's clock reading at the moment another node's clock read `local`: one node's
    /// timestamp in another's clock, via fleet time.
    public func localTime(fromLocal local: UInt64, of other: FleetClockMapping) -> UInt64 {
        localTime(atFleet: other.fleetTime(atLocal: local))
    }
}
