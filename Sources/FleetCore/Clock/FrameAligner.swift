/// Software frame alignment: steers a source that can time its own captures so that they
/// fall on a grid shared by the fleet — slots every `period` ns of fleet time from `origin` —
/// the way multi-camera rigs align sensors without a hardware trigger. Each frame's deadline
/// moves by at most `maximumStep` of a period from the nominal one, so the frame interval
/// never jumps; a few frames bring the phase in.
public struct FrameAligner: Sendable, Equatable {
    public var origin: UInt64
    /// Largest correction per frame, as a share of the period.
    public var maximumStep: Double

    public init(origin: UInt64, maximumStep: Double = 0.1) {
        self.origin = origin
        self.maximumStep = maximumStep
    }

    /// How far `fleetTime` lies from the nearest grid slot: in (−period/2, period/2], ns.
    public func phase(ofFleetTime fleetTime: UInt64, period: UInt64) -> Int64 {
        guard period > 0 else { return 0 }
        // Before the origin the grid runs on backwards.
        var phase =
            fleetTime >= origin
            ? Int64((fleetTime - origin) % period)
            : (Int64(period) - Int64((origin - fleetTime) % period)) % Int64(period)
        if phase > Int64(period / 2) { phase -= Int64(period) }
        return phase
    }

    /// The next capture deadline in the node's clock: one period after `previous`, less the
    /// phase error it would have, within the step limit.
    public func nextDeadline(after previous: UInt64, period: UInt64, mapping: FleetClockMapping) -> UInt64 {
        let nominal = previous &+ period
        let error = phase(ofFleetTime: mapping.fleetTime(atLocal: nominal), period: period)
        let limit = Int64(Double(period) * maximumStep)
        let correction = min(max(error, -limit), limit)
        return nominal &- UInt64(bitPattern: correction)
    }
}
