import FleetCore
import FleetProtocol
import Foundation

/// How an exposure audit is shown (proto-docs/clock.md, "Auditing exposures"): a table for
/// people, JSON (snake_case keys) for programs. Every figure goes out beside the timecode's
/// resolution: nothing finer than that was seen.
public enum SyncAuditViews {
    public static func show(_ result: Capfleet_V1_SyncAuditResult) -> String {
        let d = FleetTables.self
        let rows = result.cameras.map { camera -> [String] in
            let counts = ["\(camera.framesRead)/\(camera.framesSeen)", "\(camera.framesSkipped)"]
            guard camera.status.isOK else { return [camera.deviceID, camera.nodeID] + counts + ["-", "-", "-", "-", "-", camera.status.reason] }
            let offset = camera.stampOffset
            return [camera.deviceID, camera.nodeID] + counts + [
                d.signedDuration(offset.medianNs), d.signedDuration(offset.p99Ns), d.signedDuration(offset.maxNs),
                "±" + d.duration(Double(camera.stampUncertaintyNs)),
                camera.truePhase.samples > 0 ? d.duration(Double(camera.truePhase.p99Ns)) : "no grid", "ok",
            ]
        }
        let table = FleetTables.table(
            ["DEVICE", "NODE", "READ/SEEN", "SKIPPED", "OFFSET MEDIAN", "P99", "MAX", "STAMP ±", "|PHASE| P99", "STATUS"], rows)
        let seconds = Double(result.endFleetNs &- result.startFleetNs) / 1e9
        let spread = result.exposureSpread
        let across =
            spread.samples == 0
            ? "exposure spread: no frame interval had two or more cameras read"
            : "exposure spread over \(spread.samples) frame intervals: median \(d.duration(Double(spread.medianNs))), p99 \(d.duration(Double(spread.p99Ns))), max \(d.duration(Double(spread.maxNs)))"
        return
            "exposure audit over \(String(format: "%.1f", seconds)) s of \(clockName(result.clock)); offset = fleet time stamped on the frame minus the time its picture shows\n"
            + table + "\n" + across + "\n" + resolution(result)
    }

    /// What the figures can tell apart.
    public static func resolution(_ result: Capfleet_V1_SyncAuditResult) -> String {
        let exposure =
            result.longestExposureSeconds > 0
            ? "; exposures up to \(FleetTables.duration(result.longestExposureSeconds * 1e9)) long" : ""
        if result.clock != .fleet && result.clock != .hostMonotonic { return "resolution: none, no camera's timecode was read" }
        if result.resolutionNs == 0 {
            return result.clock == .fleet
                ? "resolution: unknown (the display's refresh rate was not given)\(exposure)"
                : "resolution: exact, each picture shows its own start of exposure\(exposure)"
        }
        return
            "resolution: \(FleetTables.duration(Double(result.resolutionNs))) (the display's refresh period): finer differences are not seen\(exposure)"
    }

    static func clockName(_ clock: Capfleet_V1_TimecodeClock) -> String {
        switch clock {
        case .hostMonotonic: "a synthetic scene's timecode (the coordinator machine's clock)"
        case .fleet: "a displayed fleet-time timecode"
        default: "no timecode"
        }
    }

    public struct Audit: Encodable {
        struct Figures: Encodable {
            var medianNs, p99Ns, maxNs: Int64
            var samples: UInt32

            init(_ figures: Capfleet_V1_AuditFigures) {
                medianNs = figures.medianNs; p99Ns = figures.p99Ns; maxNs = figures.maxNs; samples = figures.samples
            }

            enum CodingKeys: String, CodingKey {
                case medianNs = "median_ns", p99Ns = "p99_ns", maxNs = "max_ns", samples
            }
        }
        struct Camera: Encodable {
            var deviceId, nodeId: String
            var ok: Bool
            var error: String?
            var framesSeen, framesRead, framesSkipped, framesWithoutTimecode: UInt64
            var stampOffset: Figures?
            var stampUncertaintyNs: UInt64?
            var truePhase: Figures?
            var exposureSeconds: Double

            enum CodingKeys: String, CodingKey {
                case deviceId = "device_id", nodeId = "node_id", ok, error, framesSeen = "frames_seen", framesRead = "frames_read",
                    framesSkipped = "frames_skipped", framesWithoutTimecode = "frames_without_timecode", stampOffset = "stamp_offset",
                    stampUncertaintyNs = "stamp_uncertainty_ns", truePhase = "true_phase", exposureSeconds = "exposure_seconds"
            }
        }
        var startFleetNs, endFleetNs, resolutionNs: UInt64
        var clock: String
        var cameras: [Camera]
        var exposureSpread: Figures
        var longestExposureSeconds: Double

        public init(_ result: Capfleet_V1_SyncAuditResult) {
            startFleetNs = result.startFleetNs; endFleetNs = result.endFleetNs; resolutionNs = result.resolutionNs
            clock =
                switch result.clock {
                case .hostMonotonic: "host_monotonic"
                case .fleet: "fleet"
                default: "none"
                }
            exposureSpread = Figures(result.exposureSpread)
            longestExposureSeconds = result.longestExposureSeconds
            cameras = result.cameras.map { camera in
                let ok = camera.status.isOK
                return Camera(
                    deviceId: camera.deviceID, nodeId: camera.nodeID, ok: ok, error: ok ? nil : camera.status.reason,
                    framesSeen: camera.framesSeen, framesRead: camera.framesRead, framesSkipped: camera.framesSkipped,
                    framesWithoutTimecode: camera.framesWithoutTimecode, stampOffset: ok ? Figures(camera.stampOffset) : nil,
                    stampUncertaintyNs: ok ? camera.stampUncertaintyNs : nil,
                    truePhase: ok && camera.truePhase.samples > 0 ? Figures(camera.truePhase) : nil, exposureSeconds: camera.exposureSeconds)
            }
        }

        enum CodingKeys: String, CodingKey {
            case startFleetNs = "start_fleet_ns", endFleetNs = "end_fleet_ns", resolutionNs = "resolution_ns", clock, cameras,
                exposureSpread = "exposure_spread", longestExposureSeconds = "longest_exposure_seconds"
        }
    }
}
