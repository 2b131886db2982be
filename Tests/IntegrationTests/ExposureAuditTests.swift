import Foundation
import Testing

extension IntegrationTests {
    /// Exposure audits end to end (proto-docs/clock.md, "Auditing exposures"): synthetic
    /// cameras on agents with skewed clocks film a timecode of their own true exposures (the
    /// kernel clock every agent on this machine shares) and are aligned; `capfleet sync-audit`
    /// reads it back and finds the fleet time stamped on each frame within the stamp's error
    /// bound of the truth, and the cameras exposing together. A camera that films no timecode
    /// says so, and gives no figures.
    @Suite struct ExposureAuditTests {
        static let timecode = ["--synthetic-overlay", "timecode@0.55,0.05,0.4"]

        @Test func syncAudit_findsEachStampWithinItsBound_andAlignedCamerasExposingTogether() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agents = try [
                fleet.startAgent("plain", fps: 25, extra: Self.timecode),
                fleet.startAgent("skewed", fps: 25, extra: Self.timecode + ["--test-clock-skew=+2s,+35ppm"]),
                fleet.startAgent("blind", fps: 25),
            ]
            try await fleet.waitUntil("every clock locks", seconds: 30) { agents.allSatisfy { $0.log.contains("clock.state=locked") } }
            let nodes = Dictionary(
                uniqueKeysWithValues: try fleet.json(["nodes"]).compactMap { node in
                    (node["name"] as? String).flatMap { name in (node["node_id"] as? String).map { (name, $0) } }
                })
            let devices = try fleet.json(["devices"])
            func device(of name: String) throws -> String {
                try #require(devices.first { $0["node_id"] as? String == nodes[name] }?["device_id"] as? String, "\(name)'s camera")
            }
            let filming = [try device(of: "plain"), try device(of: "skewed")]
            let blind = try device(of: "blind")
            // Pictures are only looked at with consent, the timecode's too.
            for camera in filming + [blind] { try fleet.grantConsent(camera) }
            for camera in filming { #expect(try fleet.cli(["lock", camera]).status == 0) }
            #expect(try fleet.cli(["align"] + filming).status == 0)
            try await fleet.waitUntil("both cameras are aligned", seconds: 20) {
                try filming.allSatisfy { camera in
                    let details = try fleet.jsonObject(["device", camera])
                    return ((details["device"] as? [String: Any])?["alignment"] as? [String: Any])?["state"] as? String == "aligned"
                }
            }

            // A take records while the audit runs: its report carries the audit's figures.
            let started = try fleet.cli(["record", "start"] + filming + ["--json"], timeout: 15)
            #expect(started.status == 0, "\(started.error)")
            let takeID = try #require((try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any])?["id"] as? String)
            let run = try fleet.cli(["sync-audit"] + filming + [blind, "--seconds", "5", "--json"], timeout: 20)
            #expect(run.status == 0, "\(run.error)")
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)
            let report = try await SecondLaneIntegrationTests.TakeSyncReportTests.finalReport(takeID, in: fleet)
            let carried = try #require(report["audit"] as? [String: Any], "the take's report keeps the audit run during it: \(report)")
            #expect(((carried["exposure_spread"] as? [String: Any])?["samples"] as? Int ?? 0) >= 1, "\(carried)")
            let shown = try fleet.cli(["recordings", "show", takeID])
            #expect(shown.output.contains("exposure audit during the take:"), "\(shown.output)")
            let audit = try #require(try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any])
            let cameras = try #require(audit["cameras"] as? [[String: Any]])
            #expect(cameras.map { $0["device_id"] as? String } == filming + [blind])
            #expect(audit["clock"] as? String == "host_monotonic")
            #expect(audit["resolution_ns"] as? Int == 0, "a synthetic scene shows each exposure's exact time")
            for camera in cameras.prefix(2) {
                #expect(camera["ok"] as? Bool == true, "\(camera)")
                // How many frames are read depends on how busy the machine is; some must be.
                let read = camera["frames_read"] as? Int ?? 0
                #expect(read >= 5, "frames whose timecode was read: \(camera)")
                let offset = camera["stamp_offset"] as? [String: Any] ?? [:]
                let largest = abs(offset["max_ns"] as? Int ?? .max)
                let bound = camera["stamp_uncertainty_ns"] as? Int ?? 0
                print(
                    "exposure audit: \(camera["device_id"] ?? "?") read \(read) of \(camera["frames_seen"] ?? "?") frames; stamp offset \(offset), bound ±\(bound) ns, |phase| \(camera["true_phase"] ?? "none")"
                )
                #expect(largest <= bound + 200_000, "every stamp within its error bound (+200 µs) of the true exposure: \(camera)")
            }
            let spread = try #require(audit["exposure_spread"] as? [String: Any])
            print("exposure audit: spread across 2 aligned cameras at 25 fps (interval 40 ms): \(spread)")
            #expect((spread["samples"] as? Int ?? 0) >= 1, "frame intervals with both cameras read")
            #expect((spread["p99_ns"] as? Int ?? .max) < 4_000_000, "aligned cameras expose far closer than a frame interval (40 ms)")

            // The camera without a timecode is refused honestly, with what to do.
            let refused = try #require(cameras.last)
            #expect(refused["ok"] as? Bool == false)
            #expect(refused["stamp_offset"] == nil)
            let reason = refused["error"] as? String ?? ""
            #expect(reason.hasPrefix("no timecode in view: ") && reason.contains("--synthetic-overlay timecode@"), "\(reason)")

            // People read a table that says the resolution; a camera alone with no timecode is status 3.
            let table = try fleet.cli(["sync-audit", filming[0], blind, "--seconds", "2"], timeout: 20)
            print("exposure audit: table\n\(table.output)")
            #expect(table.status == 0 && table.output.contains("resolution: exact") && table.output.contains("no timecode in view"), "\(table)")
            let alone = try fleet.cli(["sync-audit", blind, "--seconds", "1"], timeout: 20)
            #expect(alone.status == 3 && alone.output.contains("no timecode in view"), "\(alone)")
        }
    }
}
