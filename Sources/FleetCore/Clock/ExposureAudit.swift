import FleetProtocol

/// What an exposure audit found (proto-docs/clock.md, "Auditing exposures"): from what each
/// camera read of the timecode it filmed, how far the fleet time stamped on its frames lies
/// from the true time of their exposure, where those exposures fell on the device's grid, and
/// how far apart the cameras' exposures of one frame interval were. Pure: the coordinator asks
/// the agents and hands their answers here.
public enum ExposureAudit {
    /// One camera's answer to AuditExposures: what its agent read, or why it read nothing.
    public struct Answer: Sendable {
        public var deviceID: String
        public var nodeID: String
        public var status: Capfleet_V1_Status
        public var samples: Capfleet_V1_ExposureAuditSamples?

        public init(deviceID: String, nodeID: String, status: Capfleet_V1_Status, samples: Capfleet_V1_ExposureAuditSamples?) {
            self.deviceID = deviceID
            self.nodeID = nodeID
            self.status = status
            self.samples = samples
        }
    }

    /// Which machine's CLOCK_MONOTONIC the fleet time is made from, and how: fleet time =
    /// CLOCK_MONOTONIC + `fleetEpochOffset` on the machine `bootID` names (the coordinator's).
    public struct Truth: Sendable {
        public var bootID: String
        public var fleetEpochOffset: UInt64

        public init(bootID: String, fleetEpochOffset: UInt64) {
            self.bootID = bootID
            self.fleetEpochOffset = fleetEpochOffset
        }

        /// The fleet time a timecode shows, or nil when it shows a clock the fleet's cannot be
        /// compared with (another machine's, or none).
        public func fleetTime(of sample: Capfleet_V1_ExposureSample) -> UInt64? {
            switch sample.clock {
            case .fleet: sample.timecodeNs
            case .hostMonotonic where sample.timecodeBootID == bootID: sample.timecodeNs &+ fleetEpochOffset
            default: nil
            }
        }
    }

    /// A camera's usable reads: true exposure times in fleet ns, in capture order.
    struct Reads {
        var times: [UInt64]
        var interval: UInt64
    }

    public static func result(of answers: [Answer], truth: Truth, start: UInt64, end: UInt64) -> Capfleet_V1_SyncAuditResult {
        var cameras: [Capfleet_V1_SyncAuditResult.Camera] = []
        var reads: [Reads] = []
        var resolution: UInt64 = 0
        var clocks: [Capfleet_V1_TimecodeClock] = []
        for answer in answers {
            let (camera, read, used) = Self.camera(answer, truth: truth)
            cameras.append(camera)
            if let read { reads.append(read) }
            for sample in used {
                clocks.append(sample.clock)
                if sample.clock == .fleet, sample.displayRefreshMhz > 0 {
                    resolution = max(resolution, 1_000_000_000_000 / UInt64(sample.displayRefreshMhz))
                }
            }
        }
        return .with {
            $0.startFleetNs = start
            $0.endFleetNs = end
            $0.cameras = cameras
            $0.exposureSpread = AuditFigures.unsigned(spreads(reads))
            $0.resolutionNs = resolution
            $0.longestExposureSeconds = cameras.filter(\.status.isOK).map(\.exposureSeconds).max() ?? 0
            $0.clock = clocks.first.map { first in clocks.allSatisfy { $0 == first } ? first : .unspecified } ?? .unspecified
        }
    }

    /// The reply's own status: OK, saying how many cameras have no figures when some have none.
    public static func status(of result: Capfleet_V1_SyncAuditResult) -> Capfleet_V1_Status {
        let without = result.cameras.filter { !$0.status.isOK }.count
        guard without > 0 else { return .ok }
        return .with {
            $0.code = .ok
            $0.reason = "\(without) of \(result.cameras.count) cameras have no figures: see each one's status"
        }
    }

    static func camera(
        _ answer: Answer, truth: Truth
    ) -> (Capfleet_V1_SyncAuditResult.Camera, Reads?, [Capfleet_V1_ExposureSample]) {
        var camera = Capfleet_V1_SyncAuditResult.Camera.with {
            $0.deviceID = answer.deviceID
            $0.nodeID = answer.nodeID
        }
        guard answer.status.isOK, let samples = answer.samples else {
            camera.status = answer.status.isOK ? .failure(.internal, "device \(answer.deviceID)'s agent answered without its audit") : answer.status
            return (camera, nil, [])
        }
        camera.framesSeen = samples.framesSeen
        camera.framesSkipped = samples.framesSkipped
        camera.framesWithoutTimecode = samples.framesWithoutTimecode
        camera.exposureSeconds = samples.exposureSeconds
        if let refusal = refusal(answer.deviceID, samples, truth: truth) {
            camera.status = refusal
            return (camera, nil, [])
        }
        let used = samples.samples.filter { truth.fleetTime(of: $0) != nil }.sorted { $0.sequence < $1.sequence }
        let times = used.map { truth.fleetTime(of: $0)! }
        camera.status = .ok
        camera.framesRead = UInt64(used.count)
        camera.stampOffset = AuditFigures.signed(zip(used, times).map { Int64(bitPattern: $0.stampedFleetNs &- $1) })
        camera.stampUncertaintyNs = used.map(\.uncertaintyNs).max() ?? 0
        let interval = samples.frameRate > 0 ? UInt64((1e9 / samples.frameRate).rounded()) : 0
        if samples.gridOriginFleetNs != 0, interval > 0 {
            let grid = FrameGrid(origin: samples.gridOriginFleetNs, interval: interval)
            camera.truePhase = AuditFigures.unsigned(times.map { grid.phase(of: $0).magnitude })
        }
        return (camera, interval > 0 ? Reads(times: times, interval: interval) : nil, used)
    }

    /// Why a camera has no figures, in words that say what to do; nil when it has some.
    static func refusal(_ deviceID: String, _ samples: Capfleet_V1_ExposureAuditSamples, truth: Truth) -> Capfleet_V1_Status? {
        if samples.framesSeen == 0 {
            return .failure(.unavailable, "device \(deviceID) captured no frame during the audit: is it streaming? (capfleet devices)")
        }
        if samples.framesDecoded == 0 {
            return .failure(
                .unavailable,
                "device \(deviceID) captured \(samples.framesSeen) frames during the audit but decoded none (\(samples.framesSkipped) skipped while the decoder was busy; the rest had no fleet time or no consent to be looked at)"
            )
        }
        if samples.samples.isEmpty {
            return .failure(
                .unavailable,
                "no timecode in view: \(samples.framesDecoded) frames decoded, none showed one; point the camera at the dashboard's timecode page or give a synthetic camera --synthetic-overlay timecode@X,Y,W"
            )
        }
        guard samples.samples.contains(where: { truth.fleetTime(of: $0) != nil }) else {
            let shown = samples.samples.first { $0.clock == .hostMonotonic }?.timecodeBootID
            return .failure(
                .unsupported,
                shown.map {
                    "the timecode device \(deviceID) films shows another machine's clock (boot id \($0), the coordinator's is \(truth.bootID)): a synthetic scene is only comparable when its cameras run on the coordinator's machine; film the dashboard's timecode page instead"
                } ?? "the timecode device \(deviceID) films names no clock the fleet knows")
        }
        return nil
    }

    /// For every frame interval in which two or more cameras were read: the latest true
    /// exposure minus the earliest. The camera read most often sets the intervals; each other
    /// camera joins one with its read nearest to it, within half an interval.
    static func spreads(_ reads: [Reads]) -> [UInt64] {
        guard reads.count >= 2, let reference = reads.indices.max(by: { reads[$0].times.count < reads[$1].times.count }) else { return [] }
        let others = reads.indices.filter { $0 != reference }.map { reads[$0].times.sorted() }
        let half = reads[reference].interval / 2
        var spreads: [UInt64] = []
        for time in reads[reference].times {
            var earliest = time, latest = time, joined = 0
            for times in others {
                guard let nearest = nearest(to: time, in: times), max(nearest, time) - min(nearest, time) < half else { continue }
                earliest = min(earliest, nearest)
                latest = max(latest, nearest)
                joined += 1
            }
            if joined > 0 { spreads.append(latest - earliest) }
        }
        return spreads
    }

    static func nearest(to time: UInt64, in sorted: [UInt64]) -> UInt64? {
        guard !sorted.isEmpty else { return nil }
        var low = 0, high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] < time { low = middle + 1 } else { high = middle }
        }
        let candidates = [low - 1, low].filter { sorted.indices.contains($0) }.map { sorted[$0] }
        return candidates.min { max($0, time) - min($0, time) < max($1, time) - min($1, time) }
    }
}

/// Median, 99th percentile and largest of a set of figures (ns), as AuditFigures carries them.
public enum AuditFigures {
    /// Signed figures: the median by value; p99 and max by magnitude, keeping their sign.
    public static func signed(_ values: [Int64]) -> Capfleet_V1_AuditFigures {
        guard !values.isEmpty else { return .init() }
        let byValue = values.sorted()
        let byMagnitude = values.sorted { $0.magnitude < $1.magnitude }
        return .with {
            $0.medianNs = byValue[rank(0.5, of: values.count)]
            $0.p99Ns = byMagnitude[rank(0.99, of: values.count)]
            $0.maxNs = byMagnitude[values.count - 1]
            $0.samples = UInt32(clamping: values.count)
        }
    }

    /// Magnitudes (spreads, |phase|).
    public static func unsigned(_ values: [UInt64]) -> Capfleet_V1_AuditFigures {
        signed(values.map { Int64(clamping: $0) })
    }

    /// Nearest rank: the smallest index holding at least `share` of the values.
    static func rank(_ share: Double, of count: Int) -> Int {
        min(max(Int((share * Double(count)).rounded(.up)) - 1, 0), count - 1)
    }
}
