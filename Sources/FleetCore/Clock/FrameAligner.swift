/// The grid a fleet's frames are aligned on — slots every `period` ns of fleet time from
/// `origin` — and where a frame falls against it. `FramePhaseLoop` steers sensors onto it.
public struct FrameAligner: Sendable, Equatable {
    public var origin: UInt64

    public init(origin: UInt64) {
        self.origin = origin
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
}
