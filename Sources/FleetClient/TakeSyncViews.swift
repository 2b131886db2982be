import FleetCore
import FleetProtocol
import Foundation

/// A take's sync and integrity report (recordings.md, "Sync and integrity"): lines and a
/// table for people, JSON for programs and for the file an export writes beside the take.
public enum TakeSyncViews {
    public struct Report: Encodable {
        struct Requirements: Encodable {
            var maxSpreadNs: UInt64?
            var noDrops, clocksLocked, inPhase: Bool

            enum CodingKeys: String, CodingKey {
                case maxSpreadNs = "max_spread_ns", noDrops = "no_drops", clocksLocked = "clocks_locked", inPhase = "in_phase"
            }
        }
        struct Figures: Encodable {
            var medianNs, p99Ns, maxNs: Int64
            var samples: UInt32

            enum CodingKeys: String, CodingKey { case medianNs = "median_ns", p99Ns = "p99_ns", maxNs = "max_ns", samples }
        }
        struct Camera: Encodable {
            var deviceId, nodeId: String
            var worstClock: String?
            var maxUncertaintyNs: UInt64
            var steered: Bool
            var worstAlignment: String?
            var phaseMedianNs, phaseP99Ns, outOfPhaseNs, framesExpected, framesCaptured: UInt64
            var drops: [String: UInt64]
            /// nil: the agent never said how full its take's write queue got.
            var writerHeadroom: Double?
            var statusReports: UInt32
            /// How its exposures were timed during the take (since 1.15); nil when not reported.
            var exposureTiming: String?

            enum CodingKeys: String, CodingKey {
                case deviceId = "device_id", nodeId = "node_id", worstClock = "worst_clock", maxUncertaintyNs = "max_uncertainty_ns", steered,
                    worstAlignment = "worst_alignment", phaseMedianNs = "phase_median_ns", phaseP99Ns = "phase_p99_ns",
                    outOfPhaseNs = "out_of_phase_ns", framesExpected = "frames_expected", framesCaptured = "frames_captured", drops,
                    writerHeadroom = "writer_headroom", statusReports = "status_reports", exposureTiming = "exposure_timing"
            }
        }
        var verdict: String
        var failures: [String]
        var requirements: Requirements
        var phaseSpread: Figures
        var cameras: [Camera]
        /// An exposure audit that ran during the take; absent when none did.
        var audit: SyncAuditViews.Audit?

        enum CodingKeys: String, CodingKey {
            case verdict, failures, requirements, phaseSpread = "phase_spread", cameras, audit
        }

        public init(_ report: Capfleet_V1_TakeSyncReport) {
            verdict = TakeSyncVerdict.Outcome(wire: report.verdict)?.rawValue ?? "unknown"
            failures = report.failures
            let asked = report.requirements
            requirements = Requirements(
                maxSpreadNs: asked.maxSpreadNs == 0 ? nil : asked.maxSpreadNs, noDrops: asked.noDrops, clocksLocked: asked.clocksLocked,
                inPhase: asked.inPhase)
            phaseSpread = Figures(
                medianNs: report.phaseSpread.medianNs, p99Ns: report.phaseSpread.p99Ns, maxNs: report.phaseSpread.maxNs,
                samples: report.phaseSpread.samples)
            cameras = report.cameras.map { camera in
                Camera(
                    deviceId: camera.deviceID, nodeId: camera.nodeID, worstClock: camera.worstSync.name, maxUncertaintyNs: camera.maxUncertaintyNs,
                    steered: camera.steered, worstAlignment: camera.worstAlignment.name, phaseMedianNs: camera.phaseMedianNs,
                    phaseP99Ns: camera.phaseP99Ns, outOfPhaseNs: camera.outOfPhaseNs, framesExpected: camera.framesExpected,
                    framesCaptured: camera.framesCaptured, drops: RecordingViews.dropsByReason(camera.drops),
                    writerHeadroom: camera.writerHeadroom < 0 ? nil : camera.writerHeadroom, statusReports: camera.statusReports,
                    exposureTiming: camera.exposureTiming.isEmpty ? nil : camera.exposureTiming)
            }
            audit = report.hasAudit ? SyncAuditViews.Audit(report.audit) : nil
        }
    }

    /// The verdict in a few words: "certified", "FAILED: …", "recording (figures so far)".
    public static func headline(_ report: Capfleet_V1_TakeSyncReport) -> String {
        let asked = requirements(report.requirements)
        switch report.verdict {
        case .certified: return "certified (\(asked))"
        case .failed: return "FAILED (\(asked)): \(report.failures.count) requirement(s) not met"
        case .reported: return "reported (nothing required)"
        case .recording: return "recording, figures so far" + (asked.isEmpty ? "" : " (\(asked))")
        default: return "unknown"
        }
    }

    /// What the take was asked to keep to, as the flags that ask it say.
    public static func requirements(_ asked: Capfleet_V1_TakeRequirements) -> String {
        var parts: [String] = []
        if asked.maxSpreadNs > 0 { parts.append("spread ≤ \(TakeSyncVerdict.spoken(asked.maxSpreadNs))") }
        if asked.noDrops { parts.append("no drops") }
        if asked.clocksLocked { parts.append("locked clocks") }
        if asked.inPhase { parts.append("in phase") }
        return parts.joined(separator: ", ")
    }

    /// The report as `recordings show` prints it: the verdict, each failure, the spread, and
    /// a row per camera.
    public static func lines(_ report: Capfleet_V1_TakeSyncReport) -> [String] {
        var lines = ["  sync: " + headline(report)]
        for failure in report.failures { lines.append("    - \(failure)") }
        if report.phaseSpread.samples > 0 {
            let spread = report.phaseSpread
            lines.append(
                "  phase spread across cameras: median \(spoken(spread.medianNs)), p99 \(spoken(spread.p99Ns)), max \(spoken(spread.maxNs)) (\(spread.samples) reports)"
            )
        }
        lines.append("")
        lines.append(
            FleetTables.table(
                ["DEVICE", "CLOCK", "± MAX", "ALIGNMENT", "PHASE MEDIAN", "PHASE P99", "OUT OF PHASE", "FRAMES", "DROPS", "HEADROOM", "REPORTS"],
                report.cameras.map { camera in
                    // No grid all along: no phase to show (0 would read as perfect).
                    let noPhase = camera.phaseP99Ns == 0 && (camera.worstAlignment == .off || camera.worstAlignment == .unspecified)
                    return [
                        camera.deviceID, camera.worstSync.name ?? "-", TakeSyncVerdict.spoken(camera.maxUncertaintyNs),
                        (camera.worstAlignment.name ?? "-") + (camera.steered ? "" : " (free-running)"),
                        noPhase ? "-" : TakeSyncVerdict.spoken(camera.phaseMedianNs), noPhase ? "-" : TakeSyncVerdict.spoken(camera.phaseP99Ns),
                        TakeSyncVerdict.spoken(camera.outOfPhaseNs), "\(camera.framesCaptured)/\(camera.framesExpected)",
                        String(camera.drops.late + camera.drops.outOfBuffers + camera.drops.discontinuity + camera.drops.encoderLate),
                        camera.writerHeadroom < 0 ? "-" : String(format: "%.0f%%", camera.writerHeadroom * 100), String(camera.statusReports),
                    ]
                }))
        // How each camera's exposures were timed: what a wired or triggered take was shot with.
        let timed = report.cameras.filter { !$0.exposureTiming.isEmpty }
        if !timed.isEmpty {
            lines.append("")
            lines.append("  exposures timed by:")
            for camera in timed { lines.append("    \(camera.deviceID): \(camera.exposureTiming)") }
        }
        if report.hasAudit {
            // What the cameras saw during the take, beside what their stamps said.
            lines.append("")
            lines.append("  exposure audit during the take:")
            lines += SyncAuditViews.show(report.audit).split(separator: "\n", omittingEmptySubsequences: false).map { "    " + $0 }
        }
        return lines
    }

    static func spoken(_ ns: Int64) -> String { TakeSyncVerdict.spoken(ns.magnitude) }

    /// `--require-spread`: 1ms, 250us (or µs), 800ns, 0.5s; nil for anything else, zero or
    /// more than a second (a spread past a frame interval means nothing).
    public static func spreadNanoseconds(_ text: String) -> UInt64? {
        let units: [(String, Double)] = [("ms", 1e6), ("us", 1e3), ("µs", 1e3), ("ns", 1), ("s", 1e9)]
        guard let (suffix, scale) = units.first(where: { text.hasSuffix($0.0) }), let value = Double(text.dropLast(suffix.count)),
            value.isFinite, value > 0, value * scale >= 1, value * scale <= 1e9
        else { return nil }
        return UInt64((value * scale).rounded())
    }
}
