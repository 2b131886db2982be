import Foundation
import Glibc
import Testing

extension SecondLaneIntegrationTests {
    /// Takes that say whether they are good (recordings.md, "Sync and integrity"): a take that
    /// asked for requirements ends certified or failed, with the reason named, and the report
    /// travels with `recordings show`, `--json`, the listing and every export.
    @Suite(.serialized) struct TakeSyncReportTests {
        /// Two hosts, clocks locked before the take: a take that asks for locked clocks is
        /// certified, and its report has every camera's figures from the agents' status.
        @Test func aTakeAskingForLockedClocks_isCertified_andItsReportTravelsWithShowListAndExport() async throws {
            let fleet = try FleetHarness()
            let coordinator = try fleet.startCoordinator()
            let devices = try await RecordingTests.devices(in: fleet, agents: ["sync1", "sync2"], fps: 15)
            let started = try fleet.cli(["record", "start"] + devices + ["--require-locked-clocks", "--json"], timeout: 15)
            #expect(started.status == 0, "\(started.error)")
            let take = try #require(try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any])
            let takeID = try #require(take["id"] as? String)

            // While it records: the figures so far.
            try await fleet.waitUntil("the take's report has figures so far", seconds: 15) {
                let report = try RecordingTests.show(takeID, in: fleet)["sync_report"] as? [String: Any]
                let cameras = report?["cameras"] as? [[String: Any]] ?? []
                return report?["verdict"] as? String == "recording" && cameras.allSatisfy { ($0["status_reports"] as? Int ?? 0) > 0 }
                    && cameras.count == 2
            }
            try await Task.sleep(for: .seconds(2))
            let stopped = try fleet.cli(["record", "stop", takeID], timeout: 30)
            #expect(stopped.status == 0, "\(stopped.error)")

            let report = try await Self.finalReport(takeID, in: fleet)
            #expect(report["verdict"] as? String == "certified", "\(report)")
            #expect((report["failures"] as? [String])?.isEmpty == true, "\(report)")
            #expect((report["requirements"] as? [String: Any])?["clocks_locked"] as? Bool == true)
            let cameras = try #require(report["cameras"] as? [[String: Any]])
            #expect(cameras.compactMap { $0["device_id"] as? String }.sorted() == devices)
            for camera in cameras {
                #expect((camera["status_reports"] as? Int ?? 0) >= 2, "a status a second for seconds: \(camera)")
                #expect((camera["frames_captured"] as? Int ?? 0) > 0 && (camera["frames_expected"] as? Int ?? 0) > 0, "\(camera)")
                #expect(camera["worst_clock"] as? String == "locked", "\(camera)")
                #expect(camera["writer_headroom"] as? Double != nil, "an agent-held take's writer reports its queue: \(camera)")
            }

            let shown = try fleet.cli(["recordings", "show", takeID])
            print("take sync report, certified:\n\(shown.output.split(separator: "\n").prefix(12).joined(separator: "\n"))")
            #expect(shown.output.contains("sync: certified (locked clocks)"), "\(shown.output)")
            let listed = try fleet.json(["recordings", "list"]).first { $0["id"] as? String == takeID }
            #expect((listed?["sync_report"] as? [String: Any])?["verdict"] as? String == "certified", "ended takes carry it in the listing")
            let folder = fleet.directory + "/export-sync"
            let exported = try fleet.cli(["recordings", "export", takeID, "--to", folder, "--frame-sets"], timeout: 120)
            #expect(exported.status == 0, "\(exported.output)\(exported.error)")
            let file = try String(contentsOfFile: folder + "/sync-report.json", encoding: .utf8)
            #expect(file.contains("\"verdict\" : \"certified\"") || file.contains("\"verdict\":\"certified\""), "\(file)")
            // The frame sets travel with the export: a row per slot, a sequence and offset per
            // camera, paired from the files' exact frame times, as `recordings sets` counts them.
            let rows = try String(contentsOfFile: folder + "/frame-sets.csv", encoding: .utf8).split(separator: "\n").map {
                $0.split(separator: ",", omittingEmptySubsequences: false)
            }
            let header = try #require(rows.first).map(String.init)
            #expect(
                header == ["slot_fleet_ns", "spread_ns", "complete", "over_tolerance"] + devices.flatMap { ["\($0).sequence", "\($0).offset_ns"] })
            let sets = try fleet.jsonObject(["recordings", "sets", takeID])
            #expect(rows.count - 1 == sets["sets"] as? Int, "\(rows.count - 1) rows, \(sets["sets"] ?? "?") sets")
            let completeRows = rows.dropFirst().filter { $0.count > 2 && $0[2] == "1" }.count
            #expect(completeRows == sets["complete"] as? Int && completeRows >= (rows.count - 1) * 8 / 10, "\(sets)")
            #expect(((sets["cameras"] as? [[String: Any]]) ?? []).allSatisfy { $0["exact"] as? Bool == true }, "\(sets)")
            print("take frame sets: \(sets["sets"] ?? 0) sets, \(sets["complete"] ?? 0) complete, spread \(sets["spread"] ?? [:])")

            // The stored report outlives the coordinator (SIGKILL, then a new one on the same data).
            coordinator.kill()
            try fleet.startCoordinator()
            var again: [String: Any]?
            try await fleet.waitUntil("the restarted coordinator shows the take", seconds: 30) {
                again = (try? RecordingTests.show(takeID, in: fleet))?["sync_report"] as? [String: Any]
                return again != nil
            }
            #expect(again?["verdict"] as? String == "certified", "\(String(describing: again))")
            #expect((again?["cameras"] as? [[String: Any]])?.count == 2)
        }

        /// A camera never aligned cannot be held in phase: a take that asks for it fails, and
        /// says which camera and why, in the report, the audit and `recordings show`.
        @Test func aTakeAskingToBeInPhase_withACameraNeverAligned_failsNamingTheCamera() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let devices = try await RecordingTests.devices(in: fleet, agents: ["loose"], fps: 15)
            let device = try #require(devices.first)
            let started = try fleet.cli(["record", "start", device, "--require-in-phase", "--require-spread", "1ms", "--json"], timeout: 15)
            #expect(started.status == 0, "\(started.error)")
            let take = try #require(try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any])
            let takeID = try #require(take["id"] as? String)
            try await Task.sleep(for: .seconds(3))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)

            let report = try await Self.finalReport(takeID, in: fleet)
            #expect(report["verdict"] as? String == "failed", "\(report)")
            let failures = report["failures"] as? [String] ?? []
            #expect(
                failures == ["\(device) was not steered (off): it cannot be held in phase"], "one camera: no spread asked of it alone: \(failures)")
            let shown = try fleet.cli(["recordings", "show", takeID]).output
            print("take sync report, failed:\n\(shown.split(separator: "\n").prefix(10).joined(separator: "\n"))")
            #expect(shown.contains("FAILED") && shown.contains("\(device) was not steered"), "\(shown)")
        }

        /// A camera that loses frames mid-take: its agent is stopped (SIGSTOP) for 600 ms, its
        /// sensor exposes on meanwhile and the frames read out then are lost, counted as a
        /// discontinuity. A take that asked for no drops fails, naming the camera, how many and why.
        @Test func aTakeAskingForNoDrops_withFramesLostMidTake_failsNamingTheCameraAndTheReason() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("dropper", fps: 15)
            try await fleet.waitUntil("its clock locks", seconds: 30) { agent.log.contains("clock.state=locked") }
            let device = try #require(try fleet.json(["devices"]).compactMap { $0["device_id"] as? String }.first)
            try fleet.grantConsent(device)
            let started = try fleet.cli(["record", "start", device, "--require-no-drops", "--json"], timeout: 15)
            #expect(started.status == 0, "\(started.error)")
            let take = try #require(try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any])
            let takeID = try #require(take["id"] as? String)
            try await Task.sleep(for: .seconds(2))
            #expect(Glibc.kill(agent.processIdentifier, SIGSTOP) == 0)
            try await Task.sleep(for: .milliseconds(600))
            #expect(Glibc.kill(agent.processIdentifier, SIGCONT) == 0)
            try await Task.sleep(for: .seconds(2))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)

            let report = try await Self.finalReport(takeID, in: fleet)
            #expect(report["verdict"] as? String == "failed", "\(report)")
            let failures = report["failures"] as? [String] ?? []
            #expect(failures.count == 1 && failures.first?.hasPrefix("\(device) dropped ") == true, "\(failures)")
            #expect(failures.first?.contains("discontinuity") == true, "\(failures)")
            let camera = (report["cameras"] as? [[String: Any]])?.first
            // 600 ms at 15 fps: about nine frames.
            #expect(((camera?["drops"] as? [String: Any])?["discontinuity"] as? Int ?? 0) >= 5, "\(String(describing: camera))")
            print("take sync report, a drop injected: \(failures)")
        }

        /// The take's report once stored: no longer RECORDING.
        static func finalReport(_ takeID: String, in fleet: FleetHarness) async throws -> [String: Any] {
            var report: [String: Any] = [:]
            try await fleet.waitUntil("the take's report is stored", seconds: 30) {
                report = (try RecordingTests.show(takeID, in: fleet)["sync_report"] as? [String: Any]) ?? [:]
                guard let verdict = report["verdict"] as? String else { return false }
                return verdict != "recording"
            }
            return report
        }
    }
}
