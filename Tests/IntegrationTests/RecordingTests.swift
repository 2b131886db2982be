import FleetTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension SecondLaneIntegrationTests {
    /// Takes recorded by a real coordinator from real agents (synthetic cameras), checked in
    /// the index, with `capfleet recordings verify`, and with ffprobe on the files.
    @Suite(.serialized) struct RecordingTests {
        /// Three devices start on one fleet-time instant, within one frame interval of it; their
        /// segments cut at the same multiples of the segment length; nothing is dropped; the
        /// files hold what the index says, and an export is byte for byte the same.
        @Test func threeDeviceTake_startsOnOneInstant_andStoresEveryFrame() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator(environment: ["CAPFLEET_SEGMENT_SECONDS": "2"])
            let devices = try await Self.devices(in: fleet, agents: ["r1", "r2", "r3"], fps: 30)
            let started = try fleet.cli(
                ["record", "start"] + devices + ["--at", "+2s", "--name", "trio", "--store", "coordinator", "--json"], timeout: 15)
            #expect(started.status == 0, "\(started.error)")
            let take = try #require(try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any])
            let takeID = try #require(take["id"] as? String)
            let start = try #require(take["start_fleet_ns"] as? Int)
            try await Task.sleep(for: .seconds(3))
            let noted = try fleet.cli(["record", "note", takeID, #"{"location":"stage 2","slate":"7B"}"#])
            #expect(noted.status == 0, "\(noted.error)")
            try await Task.sleep(for: .seconds(3))
            let stopped = try fleet.cli(["record", "stop", takeID], timeout: 20)
            #expect(stopped.status == 0, "\(stopped.error)")
            // A second stop changes nothing, and says so: when, by whom, and its own exit status.
            let again = try fleet.cli(["record", "stop", takeID], user: "bo")
            #expect(
                again.status == 4 && again.error.contains("take \(takeID) was already stopped at ")
                    && again.error.contains(" by ana; nothing changed"),
                "\(again.status) \(again.error)")
            #expect(!again.output.contains("stopped,"), "no second \"stopped\" line: \(again.output)")
            // A start years in the past is refused, saying the fleet's time now.
            let past = try fleet.cli(["record", "start"] + devices + ["--at", "2020-01-01T00:00:00Z"])
            #expect(past.status != 0 && past.error.contains("years in the past; the fleet's time is 20"), "\(past.error)")

            let shown = try Self.show(takeID, in: fleet)
            #expect(shown["state"] as? String == "stopped", "\(shown)")
            let parts = try #require(shown["devices"] as? [[String: Any]])
            #expect(parts.count == 3)
            let interval = 1e9 / 30
            for part in parts {
                let first = try #require(part["first_fleet_ns"] as? Int, "\(part)")
                #expect(first >= start && Double(first - start) < interval, "first frame \(first - start) ns after the start")
                #expect((part["frames"] as? Int ?? 0) >= 90, "\(part)")
                #expect(try Self.lostByTheFleet(part, in: fleet) == 0, "nothing lost beyond the slots the camera skipped: \(part)")
                #expect(part["state"] as? String == "stopped")
                #expect((part["segments"] as? Int ?? 0) >= 2, "2 s segments over 4 s: \(part)")
            }
            let spread = try #require(shown["start_spread_ns"] as? Int)
            print("recording: three-device take, start spread \(Double(spread) / 1000) µs, frames \(parts.map { $0["frames"] as? Int ?? 0 })")
            #expect(Double(spread) < interval, "first frames within one frame interval of each other")

            // Segments line up: segment k of every device covers [start + 2(k-1) s, start + 2k s).
            let segments = try #require(shown["segments"] as? [[String: Any]])
            for segment in segments {
                let number = try #require(segment["number"] as? Int)
                let first = try #require(segment["first_fleet_ns"] as? Int), last = try #require(segment["last_fleet_ns"] as? Int)
                let slotStart = start + (number - 1) * 2_000_000_000
                #expect(first >= slotStart && last < slotStart + 2_000_000_000, "segment \(number) of \(segment["device_id"] ?? "?") spans its slot")
                let path = try #require(segment["path"] as? String)
                #expect(try Self.ffprobeFrameCount(path) == segment["frames"] as? Int, "ffprobe counts what the index says in \(path)")
            }

            // Client metadata: in the index, and in every device's file as a timed JSON entry.
            let events = try #require(shown["events"] as? [[String: Any]])
            #expect(events.contains { $0["kind"] as? String == "note" && ($0["detail"] as? String ?? "").contains("stage 2") }, "\(events)")
            let subtitles = try Self.metadataEntries(
                in: segments.filter { $0["device_id"] as? String == devices[0] }.compactMap { $0["path"] as? String })
            #expect(subtitles.contains { $0.contains("\"location\":\"stage 2\"") }, "the note is in the file: \(subtitles.suffix(5)) )")
            #expect(subtitles.contains { $0.contains("\"kind\":\"sequence\"") }, "sequence markers are in the file")

            let verified = try fleet.cli(["recordings", "verify", takeID], timeout: 60)
            #expect(verified.status == 0, "\(verified.output)\(verified.error)")
            let exported = try fleet.cli(["recordings", "export", takeID, "--to", fleet.directory + "/export"], timeout: 60)
            #expect(exported.status == 0, "\(exported.error)")
            #expect(exported.output.contains("every SHA-256 matches"), "\(exported.output)")
            let listed = try fleet.json(["recordings", "list"])
            #expect(listed.first?["id"] as? String == takeID)
        }

        /// `record stop` answers once every segment of the take is closed and its SHA-256 is in
        /// the index, so an export run straight after it succeeds and its files match the index.
        /// Big frames (1280x720 NV12, about 40 MB a second) take the checksummer a while: the
        /// stop used to answer before it was done, and the export failed on the empty checksum.
        @Test func exportStraightAfterStop_ofABigFormatTake_matchesTheIndexChecksums() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let processes = [try fleet.startAgent("big", fps: 30, extra: ["--synthetic-format", "1280x720:NV12"])]
            try await fleet.waitUntil("the clock locks", seconds: 30) { processes.allSatisfy { $0.log.contains("clock.state=locked") } }
            let device = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            try fleet.grantConsent(device)
            let format = try #require(try fleet.json(["devices"]).first?["active_format"] as? [String: Any])
            #expect(format["width"] as? Int == 1280 && format["pixel_format"] as? String == "NV12", "\(format)")
            for round in 1...3 {
                let takeID = try Self.start([device], in: fleet)
                try await Task.sleep(for: .seconds(4))
                let stopped = try fleet.cli(["record", "stop", takeID], timeout: 30)
                #expect(stopped.status == 0, "\(stopped.error)")
                // The stop's promise, in the index: every segment closed, with its checksum.
                let segments = try #require(try Self.show(takeID, in: fleet)["segments"] as? [[String: Any]])
                #expect(!segments.isEmpty)
                for segment in segments {
                    #expect(segment["state"] as? String == "finished", "take \(round): \(segment)")
                    #expect((segment["sha256"] as? String ?? "").count == 64, "take \(round): checksummed when the stop is answered: \(segment)")
                }
                let destination = fleet.directory + "/export-\(round)"
                let exported = try fleet.cli(["recordings", "export", takeID, "--to", destination], timeout: 60)
                #expect(exported.status == 0, "take \(round): \(exported.error)")
                #expect(exported.output.contains("every SHA-256 matches"), "\(exported.output)")
                for segment in segments {
                    let name = ((segment["path"] as? String ?? "") as NSString).lastPathComponent
                    let copy = destination + "/" + device + "/" + name
                    #expect(try Self.sha256sum(copy) == segment["sha256"] as? String, "take \(round): \(copy) is the file the index describes")
                }
            }
        }

        /// Devices aligned to the fleet-time grid start a take on the same grid slot: their
        /// first frames lie within the clock issue's alignment bound (100 µs) of each other.
        @Test func alignedDevices_startATakeWithinTheAlignmentBound() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let devices = try await Self.devices(in: fleet, agents: ["g1", "g2", "g3"], fps: 30)
            for device in devices {
                #expect(try fleet.cli(["lock", device]).status == 0)
                #expect(try fleet.cli(["align", device]).status == 0)
            }
            try await fleet.waitUntil("every device is aligned", seconds: 20) {
                try fleet.json(["watch", "--count", "1"]).allSatisfy { ($0["alignment"] as? [String: Any])?["state"] as? String == "aligned" }
            }
            let takeID = try Self.start(devices, in: fleet)
            try await Task.sleep(for: .seconds(3))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 20).status == 0)
            let shown = try Self.show(takeID, in: fleet)
            let spread = try #require(shown["start_spread_ns"] as? Int)
            print("recording: aligned three-device take, start spread \(Double(spread) / 1000) µs")
            #expect(spread <= 100_000, "aligned first frames within 100 µs: \(spread) ns")
            for part in try #require(shown["devices"] as? [[String: Any]]) { #expect(try Self.lostByTheFleet(part, in: fleet) == 0, "\(part)") }
        }

        /// The coordinator dies (SIGKILL) mid-take: on restart the segment it was writing is
        /// repaired so it plays, the index matches the files, and the take goes on with the
        /// frames the agents kept meanwhile: none is lost.
        @Test func coordinatorKilledMidTake_repairsItsSegments_andTheTakeLosesNothing() async throws {
            let fleet = try FleetHarness()
            let coordinator = try fleet.startCoordinator()
            let devices = try await Self.devices(in: fleet, agents: ["k1", "k2"], fps: 15)
            let takeID = try Self.start(devices, in: fleet)
            try await Task.sleep(for: .seconds(3))
            coordinator.kill()
            try await Task.sleep(for: .seconds(3))
            try fleet.startCoordinator()
            try await fleet.waitUntil("both agents are back", seconds: 20) { try fleet.onlineNodeIDs().count == 2 }
            try await Task.sleep(for: .seconds(3))
            let stopped = try fleet.cli(["record", "stop", takeID], timeout: 30)
            #expect(stopped.status == 0, "\(stopped.error)")
            let shown = try Self.show(takeID, in: fleet)
            #expect(shown["state"] as? String == "stopped", "\(shown)")
            for part in try #require(shown["devices"] as? [[String: Any]]) {
                #expect(try Self.lostByTheFleet(part, in: fleet) == 0, "the agents kept every frame while the coordinator was down: \(part)")
                let first = part["first_sequence"] as? Int ?? 0, last = part["last_sequence"] as? Int ?? 0
                #expect(Self.spanAccounted(part), "every sequence number stored or counted: \(part) (\(first)…\(last))")
                #expect((part["frames"] as? Int ?? 0) >= 100, "about 9 s at 15 fps: \(part)")
            }
            let segments = try #require(shown["segments"] as? [[String: Any]])
            #expect(segments.contains { $0["state"] as? String == "repaired" }, "the segment open at the crash was repaired: \(segments)")
            for segment in segments {
                let path = try #require(segment["path"] as? String)
                #expect(try Self.ffprobeFrameCount(path) == segment["frames"] as? Int, "\(path) plays and holds what the index says")
            }
            let verified = try fleet.cli(["recordings", "verify", takeID], timeout: 60)
            #expect(verified.status == 0, "\(verified.output)\(verified.error)")
        }

        /// The coordinator stopped with SIGTERM mid-take exits promptly with its segments
        /// finished (nothing to repair), and the take goes on when it is back.
        @Test func coordinatorStoppedMidTake_finishesItsSegments_andTheTakeGoesOn() async throws {
            let fleet = try FleetHarness()
            let coordinator = try fleet.startCoordinator()
            let devices = try await Self.devices(in: fleet, agents: ["t1"], fps: 15)
            let takeID = try Self.start(devices, in: fleet)
            try await Task.sleep(for: .seconds(3))
            let stopped = Date()
            kill(coordinator.process.processIdentifier, SIGTERM)
            try await fleet.waitUntil("the coordinator exits on SIGTERM", seconds: 10) { !coordinator.isRunning }
            print("recording: coordinator stopped mid-take in \(Date().timeIntervalSince(stopped)) s")
            #expect(coordinator.process.terminationStatus == 0, "\(coordinator.log.suffix(2000))")
            #expect(!coordinator.log.contains("left open by a crash"))
            try fleet.startCoordinator()
            try await fleet.waitUntil("the agent is back", seconds: 20) { try fleet.onlineNodeIDs().count == 1 }
            try await Task.sleep(for: .seconds(2))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)
            let shown = try Self.show(takeID, in: fleet)
            let segments = try #require(shown["segments"] as? [[String: Any]])
            #expect(segments.count >= 2 && segments.allSatisfy { $0["state"] as? String == "finished" }, "\(segments)")
            let part = try #require((shown["devices"] as? [[String: Any]])?.first)
            #expect(try Self.lostByTheFleet(part, in: fleet) == 0, "\(part)")
            #expect(try fleet.cli(["recordings", "verify", takeID], timeout: 60).status == 0)
        }

        /// An agent dies (SIGKILL) mid-take: the take records an interruption, and the part
        /// goes on when the agent is back, its sequence continuing in the take.
        @Test func agentKilledMidTake_recordsAnInterruption_andResumes() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let devices = try await Self.devices(in: fleet, agents: ["v1", "v2"], fps: 15)
            let takeID = try Self.start(devices, in: fleet)
            try await Task.sleep(for: .seconds(3))
            let victim = try #require(fleet.processes.first { $0.name.hasPrefix("v1-") })
            victim.kill()
            try await Task.sleep(for: .seconds(1))
            let restarted = Date()
            let again = try fleet.startAgent("v1", fps: 15)
            try await fleet.waitUntil("the restarted agent records again", seconds: 30) {
                again.log.contains("recording") && again.log.contains(takeID)
            }
            try await Task.sleep(for: .seconds(3))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)
            let shown = try Self.show(takeID, in: fleet)
            let victimNode = try #require(try fleet.nodes().first { $0["name"] as? String == "v1" }?["node_id"] as? String)
            let victimDevice = try #require(try fleet.json(["devices"]).first { $0["node_id"] as? String == victimNode }?["device_id"] as? String)
            let events = try #require(shown["events"] as? [[String: Any]])
            #expect(events.contains { $0["kind"] as? String == "interrupted" }, "\(events)")
            let part = try #require((shown["devices"] as? [[String: Any]])?.first { $0["device_id"] as? String == victimDevice })
            let last = try #require(part["last_fleet_ns"] as? Int)
            #expect(Double(last) / 1e9 > restarted.timeIntervalSince1970, "frames after the restart are in the take: \(part)")
            let verified = try fleet.cli(["recordings", "verify", takeID], timeout: 60)
            #expect(verified.status == 0, "\(verified.output)\(verified.error)")
        }

        /// Consent revoked mid-take: that device's part stops at once, recorded in the take;
        /// the others go on.
        @Test func consentRevokedMidTake_stopsThatDevicesPartAtOnce() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let devices = try await Self.devices(in: fleet, agents: ["c1", "c2"], fps: 15)
            let takeID = try Self.start(devices, in: fleet)
            try await Task.sleep(for: .seconds(3))
            let revokedAt = Date()
            let revoked = try fleet.cli(["consent", "revoke", devices[0], "--reason", "someone walked in"])
            #expect(revoked.status == 0, "\(revoked.error)")
            try await Task.sleep(for: .seconds(3))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)
            let shown = try Self.show(takeID, in: fleet)
            let parts = try #require(shown["devices"] as? [[String: Any]])
            let stoppedPart = try #require(parts.first { $0["device_id"] as? String == devices[0] })
            let other = try #require(parts.first { $0["device_id"] as? String == devices[1] })
            #expect(stoppedPart["end_reason"] as? String == "consent denied", "\(stoppedPart)")
            let stoppedLast = try #require(stoppedPart["last_fleet_ns"] as? Int)
            let otherLast = try #require(other["last_fleet_ns"] as? Int)
            #expect(otherLast - stoppedLast > 2_000_000_000, "the other device went on recording")
            let events = try #require(shown["events"] as? [[String: Any]])
            let withdrawn = try #require(events.first { $0["kind"] as? String == "consent" && $0["device_id"] as? String == devices[0] }, "\(events)")
            // The coordinator's instant of the revocation is the line: no frame captured after it
            // is in the take (a busy machine may take a while to start the CLI, never to stop),
            // but for one already handed to the part's writer as the stop was decided (100 ms).
            let withdrawnAt = try #require(withdrawn["fleet_ns"] as? Int)
            #expect(
                Double(withdrawnAt) / 1e9 >= revokedAt.timeIntervalSince1970 - 0.05
                    && Double(withdrawnAt) / 1e9 <= revokedAt.timeIntervalSince1970 + 30)
            #expect(
                stoppedLast <= withdrawnAt + 100_000_000,
                "no frame of the revoked device after the revocation: last \(stoppedLast), revoked \(withdrawnAt)")
            let verified = try fleet.cli(["recordings", "verify", takeID], timeout: 60)
            #expect(verified.status == 0, "\(verified.output)\(verified.error)")
        }

        /// The disk fills up mid-take: before it is full (the reserve), the take stops with a
        /// clear error, and every file written so far is finished, plays, and matches the index.
        @Test func aDiskFillingUp_stopsTheTakeWithAClearError_andWhatWasWrittenStaysValid() async throws {
            guard getuid() == 0 else {
                print("recording disk full: not run, mounting a small file system needs root (CI runs as root)")
                return
            }
            let fleet = try FleetHarness()
            let small = fleet.directory + "/small-disk"
            try FileManager.default.createDirectory(atPath: small, withIntermediateDirectories: true)
            try Self.shell("mount -t tmpfs -o size=40m capfleet-test \(small)")
            defer { try? Self.shell("umount -l \(small)") }
            try fleet.startCoordinator(environment: ["CAPFLEET_RECORDINGS_DIR": small, "CAPFLEET_RECORD_RESERVE_MB": "12"])
            let devices = try await Self.devices(in: fleet, agents: ["d1"], fps: 30)
            let takeID = try Self.start(devices, in: fleet)
            var shown: [String: Any] = [:]
            try await fleet.waitUntil("the take fails for want of space", seconds: 30) {
                shown = try Self.show(takeID, in: fleet)
                return shown["state"] as? String == "failed"
            }
            let error = shown["error"] as? String ?? ""
            print("recording disk full: \(error)")
            #expect(error.contains("nearly full") && error.contains("MiB free"), "\(shown)")
            let part = try #require((shown["devices"] as? [[String: Any]])?.first)
            #expect(part["state"] as? String == "failed" && (part["frames"] as? Int ?? 0) > 10, "\(part)")
            let segments = try #require(shown["segments"] as? [[String: Any]])
            #expect(!segments.isEmpty && segments.allSatisfy { $0["state"] as? String == "finished" }, "\(segments)")
            for segment in segments {
                let path = try #require(segment["path"] as? String)
                #expect(try Self.ffprobeFrameCount(path) == segment["frames"] as? Int, "\(path) plays and holds what the index says")
            }
            let verified = try fleet.cli(["recordings", "verify", takeID], timeout: 60)
            #expect(verified.status == 0, "\(verified.output)\(verified.error)")
            // The coordinator reports the disk as pressure (shutdown: below the reserve).
            try await fleet.waitUntil("the recordings disk raises the coordinator's pressure", seconds: 15) {
                try AlertsTests.events(fleet).contains { event in
                    event["kind"] as? String == "pressure_level_changed" && event["node_id"] as? String == "coordinator"
                        && (event["message"] as? String ?? "").contains("coordinator pressure shutdown")
                }
            }
            // A new take is refused while the disk is below its reserve, saying why.
            let refused = try fleet.cli(["record", "start"] + devices + ["--store", "coordinator"], timeout: 15)
            #expect(refused.status != 0 && refused.error.contains("nearly full"), "\(refused)")
        }

        // MARK: Helpers

        /// Agents with one synthetic camera each, clocks locked, consent granted.
        static func devices(in fleet: FleetHarness, agents: [String], fps: Double) async throws -> [String] {
            let processes = try agents.map { try fleet.startAgent($0, fps: fps) }
            try await fleet.waitUntil("every clock locks", seconds: 30) { processes.allSatisfy { $0.log.contains("clock.state=locked") } }
            let devices = try fleet.json(["devices"]).compactMap { $0["device_id"] as? String }.sorted()
            #expect(devices.count == agents.count)
            for device in devices { try fleet.grantConsent(device) }
            return devices
        }

        /// A take of `devices`, written where `store` says (these tests are about the coordinator's).
        static func start(_ devices: [String], in fleet: FleetHarness, store: String = "coordinator") throws -> String {
            let started = try fleet.cli(["record", "start"] + devices + ["--store", store, "--json"], timeout: 15)
            guard started.status == 0, let take = try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any],
                let id = take["id"] as? String
            else { throw HarnessError("record start failed: \(started.output)\(started.error)") }
            return id
        }

        static func show(_ takeID: String, in fleet: FleetHarness) throws -> [String: Any] {
            try fleet.jsonObject(["recordings", "show", takeID])
        }

        static func dropTotal(_ part: [String: Any]) -> Int {
            (part["drops"] as? [String: Int] ?? [:]).values.reduce(0, +)
        }

        /// What a part dropped beyond the slots its camera reported skipping: what the fleet
        /// (network, store, encoder) lost. A synthetic camera on a machine running two test
        /// lanes may miss a slot and says so as discontinuity; that is the camera, not the take.
        static func lostByTheFleet(_ part: [String: Any], in fleet: FleetHarness) throws -> Int {
            let device = part["device_id"] as? String ?? ""
            let skipped = (try fleet.deviceStats()[device]?["drops"] as? [String: Any])?["discontinuity"] as? Int ?? 0
            return max(0, dropTotal(part) - skipped)
        }

        /// Every frame of a part's span is stored or counted as dropped.
        /// The frames a take's own span holds at `fps`, one short at each edge: its start and
        /// stop instants are the fleet's, and a take begins a whole lead after the command.
        static func framesInSpan(of shown: [String: Any], fps: Int) -> Int {
            let start = (shown["start_fleet_ns"] as? NSNumber)?.int64Value ?? 0, stop = (shown["stop_fleet_ns"] as? NSNumber)?.int64Value ?? 0
            return max(0, Int((stop - start) / (1_000_000_000 / Int64(fps))) - 2)
        }

        static func spanAccounted(_ part: [String: Any]) -> Bool {
            let first = part["first_sequence"] as? Int ?? 0, last = part["last_sequence"] as? Int ?? 0
            return (part["frames"] as? Int ?? 0) + dropTotal(part) == last - first + 1
        }

        static func shell(_ command: String) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", command]
            try process.run()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw HarnessError("\(command) failed with status \(process.terminationStatus)") }
        }

        /// The timed-metadata track's entries of the files, as ffmpeg reads them (SubRip text).
        static func metadataEntries(in paths: [String]) throws -> [String] {
            try metadataTrack(in: paths).map(\.json)
        }

        /// The track's entries with where each sits in it, in milliseconds from the take's start.
        /// `track` 0 holds markers, events and notes; 1 the detections (recordings.md, "Timed metadata").
        static func metadataTrack(in paths: [String], track: Int = 0) throws -> [(milliseconds: Double, json: String)] {
            try SubtitleTrackReader.entries(in: paths, track: track)
        }

        /// A file's SHA-256 as coreutils computes it.
        static func sha256sum(_ path: String) throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
            process.arguments = [path]
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return String(String(decoding: data, as: UTF8.self).prefix(64))
        }

        /// Video frames ffprobe counts by reading the whole file.
        static func ffprobeFrameCount(_ path: String) throws -> Int? {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/ffprobe")
            process.arguments = [
                "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path,
            ]
            let out = Pipe()
            process.standardOutput = out
            process.standardError = FileHandle.nullDevice
            try process.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return Int(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }
}
