import FleetProtocol

/// A take's sync and integrity, put together from the status reports its cameras' agents
/// send about once a second (recordings.md, "Sync and integrity"). Pure: the coordinator
/// feeds it each report with the fleet time it arrived, and asks for the report (figures so
/// far while the take records, the verdict once it ended). It never sees a frame, so what
/// it costs per camera does not depend on the camera's pixel rate, and its memory does not
/// grow with the take's length.
public struct TakeSyncLedger: Sendable {
    public let start: UInt64
    public private(set) var stop: UInt64?
    public let requirements: TakeRequirements
    public private(set) var cameras: [String: TakeSyncCamera]
    /// Across cameras, at each report: the latest phase minus the earliest.
    public private(set) var spread = MagnitudeHistogram()
    /// Cameras whose first report after the stop came: their counts are closed.
    private var closed: Set<String> = []
    /// When each camera was last reported in the take (the start of the next interval).
    private var lastSeen: [String: UInt64] = [:]
    /// The latest exposure audit that ran during the take on one of its cameras (its figures
    /// are the truth the report's phases and stamps are judged by).
    public private(set) var audit: Capfleet_V1_SyncAuditResult?

    /// A camera's latest phase counts in a spread only this long after its report (a node
    /// that went silent must not hold the spread to an old phase).
    public static let freshPhaseNs: UInt64 = 2_500_000_000

    public init(start: UInt64, deviceIDs: [(deviceID: String, nodeID: String)], requirements: TakeRequirements = TakeRequirements()) {
        self.start = start
        self.requirements = requirements
        cameras = Dictionary(
            deviceIDs.map { ($0.deviceID, TakeSyncCamera(deviceID: $0.deviceID, nodeID: $0.nodeID)) }, uniquingKeysWith: { first, _ in first })
    }

    public mutating func stop(at fleetNs: UInt64) { stop = fleetNs }

    /// Takes the take up again at `fleetNs` (a restarted coordinator, whose figures before it
    /// are lost): the first statuses stand for the time since then, not since the start.
    public mutating func resume(at fleetNs: UInt64) {
        guard fleetNs > start else { return }
        for deviceID in cameras.keys { lastSeen[deviceID] = fleetNs }
    }

    /// An exposure audit ended: the take keeps it if the audit's seconds overlap the take's
    /// and it decoded one of the take's cameras (a later one replaces an earlier one).
    public mutating func audited(_ result: Capfleet_V1_SyncAuditResult) {
        let end = stop ?? .max
        guard result.endFleetNs > start, result.startFleetNs < end,
            result.cameras.contains(where: { cameras[$0.deviceID] != nil })
        else { return }
        audit = result
    }

    /// True once every camera has a report after the stop: nothing more will change.
    public var isComplete: Bool { stop != nil && closed.count == cameras.count }

    /// One node's status, arrived at `at` (fleet ns): its cameras of this take.
    public mutating func observe(_ samples: [TakeSyncSample], at: UInt64) {
        var tookPart = false
        for sample in samples {
            guard var camera = cameras[sample.deviceID], !closed.contains(sample.deviceID) else { continue }
            if at < start {
                camera.baseline(sample, at: at)
            } else if let stop, at > stop {
                let from = Swift.max(lastSeen[sample.deviceID] ?? start, start)
                camera.close(sample, at: at, interval: stop > from ? stop - from : 0, take: start...stop)
                closed.insert(sample.deviceID)
            } else {
                let from = Swift.max(lastSeen[sample.deviceID] ?? start, start)
                camera.observe(sample, at: at, interval: at - Swift.min(from, at), take: start...Swift.max(stop ?? at, start))
                lastSeen[sample.deviceID] = at
                tookPart = true
            }
            cameras[sample.deviceID] = camera
        }
        if tookPart, let tick = phaseSpread(at: at) { spread.add(tick) }
    }

    /// The latest phase minus the earliest, across the cameras with a fresh phase on the
    /// grid; nil with fewer than two. Cameras at one frame rate are compared on a circle of
    /// that interval (a free-running camera's phase wraps from +T/2 to −T/2): the smallest
    /// arc that holds every phase.
    func phaseSpread(at: UInt64) -> UInt64? {
        let fresh = cameras.values.compactMap { $0.latestPhase }.filter { at - Swift.min($0.at, at) <= Self.freshPhaseNs }
        guard fresh.count >= 2 else { return nil }
        let phases = fresh.map { $0.phaseNs }
        let rates = fresh.map { $0.frameRate }
        if let rate = rates.first, rate > 0, rates.allSatisfy({ abs($0 - rate) <= rate * 0.001 }) {
            return Self.circularRange(phases, intervalNs: Int64((1e9 / rate).rounded()))
        }
        return UInt64(phases.max()! - phases.min()!)
    }

    /// The shortest arc of a circle of `intervalNs` that holds every phase.
    public static func circularRange(_ phases: [Int64], intervalNs: Int64) -> UInt64 {
        guard intervalNs > 0, phases.count >= 2 else { return 0 }
        let onCircle = phases.map { (($0 % intervalNs) + intervalNs) % intervalNs }.sorted()
        var widestGap = onCircle[0] + intervalNs - onCircle[onCircle.count - 1]
        for (earlier, later) in zip(onCircle, onCircle.dropFirst()) { widestGap = Swift.max(widestGap, later - earlier) }
        return UInt64(intervalNs - widestGap)
    }

    /// The verdict on what was reported so far: RECORDING until the take stopped and is
    /// reported as ended.
    public func verdict(ended: Bool) -> TakeSyncVerdict {
        TakeSyncVerdict.judge(self, ended: ended)
    }

    /// Cameras in device order.
    public var orderedCameras: [TakeSyncCamera] { cameras.values.sorted { $0.deviceID < $1.deviceID } }
}
