import FleetStorage
import FleetTestSupport
import Foundation
import GRDB
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension IntegrationTests {
    /// `capfleet storage` against a real coordinator (proto-docs/recordings.md, "Destinations"):
    /// an admin adds a WebDAV destination with its password from a file; everyone sees it with
    /// the password named, never shown; an operator may not add one; removed, it is gone.
    @Suite struct StorageCommandTests {
        @Test func aDestination_isAddedByAnAdmin_listedWithoutItsSecret_andRemoved() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let password = fleet.directory + "/nas-password"
            try "correct horse\n".write(toFile: password, atomically: true, encoding: .utf8)
            let add = [
                "storage", "add", "nas", "--backend", "webdav", "--option", "url=https://nas.studio/dav", "--option", "vendor=other",
                "--option", "user=capture", "--secret", "pass=@\(password)", "--root", "stage-a",
            ]
            let added = try fleet.cli(add)
            #expect(added.status == 0 && added.output.contains("nas  webdav") && added.output.contains("secrets: pass"), "\(added)")
            #expect(!added.output.contains("correct horse"))
            let denied = try fleet.cli(add, user: "bo")
            #expect(denied.status != 0 && denied.error.contains("admin"), "an operator may not: \(denied.error)")

            let listed = try fleet.cli(["storage", "list", "--json"], user: "vi")
            let destinations = try #require(try JSONSerialization.jsonObject(with: Data(listed.output.utf8)) as? [[String: Any]], "\(listed.error)")
            #expect(destinations.count == 1 && destinations[0]["root"] as? String == "stage-a", "\(destinations)")
            #expect(destinations[0]["secret_keys"] as? [String] == ["pass"] && !listed.output.contains("correct horse"))
            #expect((destinations[0]["options"] as? [String: String])?["url"] == "https://nas.studio/dav")
            let malformed = try fleet.cli(["storage", "add", "nas", "--backend", "webdav", "--option", "url"])
            #expect(malformed.status != 0 && malformed.error.contains("KEY=VALUE"), "\(malformed.error)")

            #expect(try fleet.cli(["storage", "remove", "nas"]).status == 0)
            #expect(try fleet.cli(["storage", "list"]).output.contains("no storage destinations yet"))
        }
    }
}

extension SecondLaneIntegrationTests {
    /// `capfleet recordings offload` against a real WebDAV server (`rclone serve webdav`, the
    /// studio's storage): each host sends its own segments, each proved by SHA-256 and noted in
    /// the index; the files and the take's index are where the layout says; a copy of the right
    /// size that is not the segment's is found, replaced and said so; a camera whose consent is
    /// withdrawn keeps its segments on its host, said so; asked again, nothing is sent twice; a
    /// host gone for good with its files, the take is verified and exported from the destination.
    @Suite(.serialized) struct OffloadTests {
        @Test func aTakeOnTwoHosts_isOffloadedByEachHost_provedAndIndexed() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator(environment: ["CAPFLEET_SEGMENT_SECONDS": "2"])
            let devices = try await SecondLaneIntegrationTests.RecordingTests.devices(in: fleet, agents: ["u1", "u2"], fps: 15)
            let takeID = try SecondLaneIntegrationTests.RecordingTests.start(devices, in: fleet, store: "agent")
            try await Task.sleep(for: .seconds(5))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)

            let (server, added) = try await Self.serve("webdav", as: "studio", for: fleet, ["--root", "fleet/takes"])
            #expect(added.status == 0, "\(added.output)\(added.error)")

            var shown = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            let segments = try #require(shown["segments"] as? [[String: Any]])
            #expect(segments.count >= 4, "two cameras, 2 s segments: \(segments.count)")
            // An earlier copy of the first segment, of its size but not its bytes (a corrupted object).
            let first = try #require(segments.first)
            let firstObject = try Self.object(first, takeID: takeID, on: server)
            try FileManager.default.createDirectory(atPath: (firstObject as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(repeating: 0x5A, count: try #require(first["size_bytes"] as? Int)).write(to: URL(fileURLWithPath: firstObject))

            let offloaded = try fleet.cli(["recordings", "offload", takeID, "--to", "studio"], timeout: 120)
            #expect(offloaded.status == 0, "\(offloaded.output)\(offloaded.error)")
            #expect(offloaded.output.contains("every SHA-256 proved there"), "\(offloaded.output)")
            shown = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            let offload = try #require((shown["offloads"] as? [[String: Any]])?.first, "\(shown)")
            #expect(offload["destination"] as? String == "studio" && offload["pending_bytes"] as? Int == 0, "\(offload)")
            #expect(offload["verified"] as? Int == segments.count && offload["running"] as? Bool == false, "\(offload)")
            for segment in try #require(shown["segments"] as? [[String: Any]]) {
                let copy = try #require((segment["copies"] as? [[String: Any]])?.first, "\(segment)")
                #expect(copy["state"] as? String == "verified" && copy["proof"] as? String == "read_back", "\(copy)")
                #expect(copy["sent_by"] as? String == segment["location"] as? String, "the host holding it sent it: \(copy) \(segment)")
                let path = try #require(segment["path"] as? String)
                let object = try Self.object(segment, takeID: takeID, on: server)
                #expect(
                    copy["object_path"] as? String
                        == "fleet/takes/\(takeID)/\(segment["device_id"] as? String ?? "")/\((path as NSString).lastPathComponent)")
                #expect(
                    FileManager.default.contents(atPath: object) == FileManager.default.contents(atPath: path),
                    "the destination holds the very bytes of \(path)")
            }
            let events = try fleet.cli(["events", "--json"], timeout: 10)
            let offloadLog = fleet.processes.flatMap {
                $0.log.split(separator: "\n").filter { $0.contains("offload") || $0.contains("storage destination") }
            }
            #expect(
                events.output.contains("a corrupt copy of segment \(first["number"] as? Int ?? 0)"),
                "the replaced copy is said: \(events.output.suffix(800)) \(offloadLog.joined(separator: "\n"))")
            let index = try #require(
                FileManager.default.contents(atPath: server.folder + "/fleet/takes/\(takeID)/take.json"), "the take's index is beside its files")
            let indexed = try #require(try JSONSerialization.jsonObject(with: index) as? [String: Any])
            #expect(indexed["id"] as? String == takeID && (indexed["segments"] as? [Any])?.count == segments.count, "\(indexed.keys)")

            // Asked again: everything is proved there, nothing is sent.
            let again = try fleet.cli(["recordings", "offload", takeID, "--to", "studio", "--json"], timeout: 60)
            #expect(again.status == 0, "\(again.error)")
            let resent = try #require(try JSONSerialization.jsonObject(with: Data(again.output.utf8)) as? [String: Any])
            let copies = (resent["segments"] as? [[String: Any]] ?? []).compactMap { ($0["copies"] as? [[String: Any]])?.first }
            #expect(copies.count == segments.count && copies.allSatisfy { $0["at_unix_ms"] as? Int != nil }, "\(copies)")

            // The first camera's host gone for good, its recordings with it: the take is checked
            // and exported from the destination (recordings.md, "Reading back").
            let goneNode = try #require(first["location"] as? String)
            let goneName = try #require(try fleet.nodes().first { $0["node_id"] as? String == goneNode }?["name"] as? String)
            try #require(fleet.processes.first { $0.name.hasPrefix("\(goneName)-") }).kill()
            try FileManager.default.removeItem(atPath: fleet.directory + "/\(goneName)/recordings")
            try await fleet.waitUntil("node \(goneName) is offline", seconds: 60) {
                try fleet.nodes().first { $0["node_id"] as? String == goneNode }?["online"] as? Bool == false
            }
            let verified = try fleet.cli(["recordings", "verify", takeID], timeout: 120)
            #expect(verified.status == 0, "its segments are checked on the destination: \(verified.output)\(verified.error)")
            let exportFolder = fleet.directory + "/export"
            let exported = try fleet.cli(["recordings", "export", takeID, "--to", exportFolder], timeout: 120)
            #expect(exported.status == 0 && exported.output.contains("every SHA-256 matches"), "\(exported.output)\(exported.error)")
            let exportedFiles = (FileManager.default.enumerator(atPath: exportFolder)?.allObjects as? [String] ?? [])
            for segment in segments where segment["location"] as? String == goneNode {
                let name = ((segment["path"] as? String ?? "") as NSString).lastPathComponent
                let found = try #require(exportedFiles.first { ($0 as NSString).lastPathComponent == name }, "\(name) in \(exportedFiles)")
                #expect(
                    FileManager.default.contents(atPath: exportFolder + "/" + found)
                        == FileManager.default.contents(atPath: try Self.object(segment, takeID: takeID, on: server)),
                    "the export of \(name) is the offloaded copy")
            }

            // A camera whose consent is withdrawn keeps its segments on its host.
            // (The camera of the host still there: the gone one's segments go from the
            // coordinator's collected copies.)
            let stillThere = try #require(
                devices.first { device in segments.contains { $0["device_id"] as? String == device && $0["location"] as? String != goneNode } })
            let denied = try fleet.cli(["consent", "deny", stillThere, "--reason", "the talent left"])
            #expect(denied.status == 0, "\(denied.error)")
            let held = try fleet.cli(["recordings", "offload", takeID, "--to", "elsewhere"], timeout: 60)
            #expect(held.status != 0 && held.error.contains("no storage destination elsewhere"), "\(held.error)")
            let (server2, addedSecond) = try await Self.serve("webdav", as: "second", for: fleet)
            #expect(addedSecond.status == 0, "\(addedSecond.error)")
            let partly = try fleet.cli(["recordings", "offload", takeID, "--to", "second"], timeout: 120)
            #expect(partly.status != 0 && partly.error.contains("consent is not granted"), "\(partly.output)\(partly.error)")
            shown = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            let second = try #require((shown["offloads"] as? [[String: Any]])?.first { $0["destination"] as? String == "second" })
            let heldBack = (shown["segments"] as? [[String: Any]] ?? []).filter { $0["device_id"] as? String == stillThere }.count
            #expect(second["held_back"] as? Int == heldBack && heldBack > 0, "\(second)")
            #expect(second["verified"] as? Int == segments.count - heldBack, "the other camera's segments went: \(second)")
            withExtendedLifetime(server2) {}
        }

        /// A destination added with --offload-when-stopped receives every take once it is
        /// stored, without anyone asking, and Prometheus counts it; one with --offload-daily
        /// receives the takes not yet there at its time of day.
        @Test func aDestinationThatAsksForEveryTake_receivesOneOnceItIsStored() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator(environment: ["CAPFLEET_SEGMENT_SECONDS": "2"])
            let devices = try await SecondLaneIntegrationTests.RecordingTests.devices(in: fleet, agents: ["w1"], fps: 15)
            let (server, added) = try await Self.serve("webdav", as: "studio", for: fleet, ["--offload-when-stopped"])
            #expect(added.status == 0 && added.output.contains("every take offloaded once stored"), "\(added.output)\(added.error)")
            let takeID = try SecondLaneIntegrationTests.RecordingTests.start(devices, in: fleet, store: "agent")
            try await Task.sleep(for: .seconds(3))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)
            var offload: [String: Any] = [:]
            try await fleet.waitUntil("the take is on the destination", seconds: 60) {
                offload = (try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)["offloads"] as? [[String: Any]])?.first ?? [:]
                return offload["running"] as? Bool == false && (offload["verified"] as? Int ?? 0) > 0
            }
            #expect(offload["pending_bytes"] as? Int == 0 && offload["error"] == nil, "\(offload)")
            let actors = try await DatabaseQueue(path: fleet.databasePath).read { db in
                try String.fetchAll(db, sql: "SELECT actor FROM auditLog WHERE action = 'recording.offload' AND target = ?", arguments: [takeID])
            }
            #expect(actors == ["coordinator (offload when stopped)"], "the policy's offload is audited as the coordinator's: \(actors)")
            // Prometheus counts the copies and shows nothing left to prove.
            let scrape = try SecondLaneIntegrationTests.MetricsTests.scrape(fleet)
            let segments = offload["segments"] as? Int ?? 0
            #expect(scrape.value("capfleet_offload_segments_total", ["destination": "studio", "outcome": "verified"]) == Double(segments))
            #expect(
                (scrape.value("capfleet_offload_sent_bytes_total", ["destination": "studio"]) ?? 0) >= Double(offload["verified_bytes"] as? Int ?? 1))
            #expect(scrape.value("capfleet_offload_pending_bytes", ["destination": "studio"]) == 0)
            #expect(scrape.value("capfleet_offload_runs", ["destination": "studio"]) == 0)

            // A daily time that is not one is refused; one already past today runs at once
            // (a coordinator started after it), for every take not yet there.
            let wrong = try fleet.cli(["storage", "add", "nightly", "--backend", "webdav"] + Self.options(server) + ["--offload-daily", "24:00"])
            #expect(wrong.status != 0 && wrong.error.contains("HH:MM"), "\(wrong.error)")
            let nightly = try Self.add(server, as: "nightly", to: fleet, ["--root", "nightly", "--offload-daily", "00:00"])
            #expect(nightly.status == 0 && nightly.output.contains("offloaded daily at 00:00"), "\(nightly.output)\(nightly.error)")
            try await fleet.waitUntil("the take is on the daily destination", seconds: 60) {
                let offloads = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)["offloads"] as? [[String: Any]] ?? []
                let daily = offloads.first { $0["destination"] as? String == "nightly" } ?? [:]
                return daily["running"] as? Bool == false && daily["verified"] as? Int == segments
            }
            #expect(FileManager.default.fileExists(atPath: server.folder + "/nightly/\(takeID)/take.json"))
            let dailyActors = try await DatabaseQueue(path: fleet.databasePath).read { db in
                try String.fetchAll(
                    db, sql: "SELECT actor FROM auditLog WHERE action = 'recording.offload' AND target = ? AND detail LIKE 'to nightly%'",
                    arguments: [takeID])
            }
            #expect(dailyActors == ["coordinator (offload daily at 00:00)"], "\(dailyActors)")
        }

        /// A destination with room for less than the take: the offload stops with an error that
        /// says the destination is full, the index says so, and every segment stays on its host.
        @Test func aFullDestination_endsTheOffloadSayingSo_andNothingIsDeletedOnTheHost() async throws {
            guard getuid() == 0 else {
                print("full destination: not run, a tmpfs of its own needs root (CI runs as root)")
                return
            }
            let fleet = try FleetHarness()
            try fleet.startCoordinator(environment: ["CAPFLEET_SEGMENT_SECONDS": "1"])
            let devices = try await SecondLaneIntegrationTests.RecordingTests.devices(in: fleet, agents: ["f1"], fps: 15)
            let takeID = try SecondLaneIntegrationTests.RecordingTests.start(devices, in: fleet, store: "agent")
            try await Task.sleep(for: .seconds(4))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)
            let segments = try #require(try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)["segments"] as? [[String: Any]])
            let sizes = segments.compactMap { $0["size_bytes"] as? Int }
            // Room for about one segment of several.
            let (server, added) = try await Self.serve("sftp", as: "small", for: fleet, capacityBytes: (sizes.max() ?? 1 << 20) * 3 / 2)
            #expect(added.status == 0, "\(added.output)\(added.error)")

            let offloaded = try fleet.cli(["recordings", "offload", takeID, "--to", "small"], timeout: 120)
            #expect(offloaded.status != 0 && (offloaded.output + offloaded.error).contains("full"), "\(offloaded.output)\(offloaded.error)")
            let offload = try #require(
                (try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)["offloads"] as? [[String: Any]])?.first)
            #expect(offload["destination_full"] as? Bool == true && (offload["verified"] as? Int ?? 0) < segments.count, "\(offload)")
            #expect((offload["error"] as? String ?? "").contains("full"), "\(offload)")
            for segment in segments {
                let path = try #require(segment["path"] as? String)
                #expect(FileManager.default.fileExists(atPath: path), "the host keeps \(path)")
            }
            // The agent's retention runs every minute: none of the segments goes while not proved.
            let scrape = try SecondLaneIntegrationTests.MetricsTests.scrape(fleet)
            #expect((scrape.value("capfleet_offload_segments_total", ["destination": "small", "outcome": "failed"]) ?? 0) >= 1)
            withExtendedLifetime(server) {}
        }

        /// A storage server of `protocolName`, ready, added to the fleet as `name` with its
        /// password from a file and `extra` arguments; the CLI's answer.
        static func serve(
            _ protocolName: String, as name: String, for fleet: FleetHarness, _ extra: [String] = [], capacityBytes: Int? = nil
        ) async throws -> (StorageServer, (status: Int32, output: String, error: String)) {
            let server = try StorageServer(protocolName, capacityBytes: capacityBytes)
            try await server.ready(try Rclone(destination: try server.destination()))
            return (server, try add(server, as: name, to: fleet, extra))
        }

        static func add(
            _ server: StorageServer, as name: String, to fleet: FleetHarness, _ extra: [String]
        ) throws -> (status: Int32, output: String, error: String) {
            let password = fleet.directory + "/\(name)-password"
            try StorageServer.password.write(toFile: password, atomically: true, encoding: .utf8)
            return try fleet.cli(
                ["storage", "add", name, "--backend", server.protocolName] + options(server) + ["--secret", "pass=@\(password)"] + extra)
        }

        static func options(_ server: StorageServer) -> [String] {
            server.options.sorted { $0.key < $1.key }.flatMap { ["--option", "\($0.key)=\($0.value)"] }
        }

        /// Where a segment goes on the server's folder (recordings.md, "Layout on a destination").
        static func object(_ segment: [String: Any], takeID: String, on server: StorageServer) throws -> String {
            let path = try #require(segment["path"] as? String)
            let device = try #require(segment["device_id"] as? String)
            return server.folder + "/fleet/takes/\(takeID)/\(device)/\((path as NSString).lastPathComponent)"
        }
    }
}
