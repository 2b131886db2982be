import FleetCore
import FleetHost
import FleetProtocol
import Foundation
import Testing

@testable import FleetAgent

/// Detection counts in the host's pressure (detection.md): the share of due frames its
/// detectors skipped is a factor of its own.
struct DetectionPressureTests {
    @Test func theTally_countsTheInterval_andHasNoRateWhenNothingWasDue() {
        let earlier = DetectionTally(examined: 10, skipped: 2)
        let now = DetectionTally(examined: 16, skipped: 8)
        #expect(now.since(earlier) == DetectionTally(examined: 6, skipped: 6))
        #expect(now.since(earlier).skipRate == 0.5)
        #expect(now.since(now).skipRate == nil, "no frame due: no factor")
        #expect(earlier.since(now) == DetectionTally(), "a device re-created restarts its counts")
    }

    @Test func aMonitor_reportsTheDetectionFactor_andItsRate_fromTheAgentsLoad() throws {
        // A root with no kernel files: the host exposes nothing, so only the agent's own load counts.
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-pressure-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let monitor = PressureMonitor(
            sampler: PressureSampler(root: root, disks: []), thresholds: PressureThresholds(), interval: .seconds(1), nodeID: "node-1",
            load: { AgentLoad(drops: DropTally(), frames: 30, queueFill: 0, detection: DetectionTally(examined: 3, skipped: 7)) },
            onChange: { _ in })
        monitor.sampleOnce()
        let report = try #require(monitor.latest)
        #expect(report.hasDetectionSkipRate && abs(report.detectionSkipRate - 0.7) < 1e-12)
        #expect(report.factors.map(\.factor) == ["detection"] && report.level == .serious, "\(report)")
    }
}
