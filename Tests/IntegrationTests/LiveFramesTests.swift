import FleetBus
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

extension IntegrationTests {
    /// Full-rate frames cross the network only while someone wants them (frames.md, "Live
    /// frames on demand"): with nobody watching the coordinator receives no frame bytes while
    /// the counts go on; a snapshot or a viewer wakes the flow, which stops when they go; a
    /// stalled viewer costs the others nothing.
    @Suite struct LiveFramesTests {
        /// One synthetic camera, consent granted, counting frames.
        static func cameraFleet(fps: Double = 15, format: String = "320x240:YUYV") async throws -> (FleetHarness, String) {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("cam", fps: fps, extra: ["--synthetic-format", format])
            var deviceID = ""
            try await fleet.waitUntil("the camera registers and captures", seconds: 30) {
                guard let stats = try fleet.deviceStats().values.first,
                    (stats["frames_captured"] as? Int ?? 0) > 0
                else { return false }
                deviceID = stats["device_id"] as? String ?? ""
                return true
            }
            try fleet.grantConsent(deviceID)
            return (fleet, deviceID)
        }

        static func counts(_ fleet: FleetHarness, _ deviceID: String) throws -> (captured: Int, received: Int, receivedBytes: Int) {
            let stats = try #require(try fleet.deviceStats()[deviceID])
            return (stats["frames_captured"] as? Int ?? 0, stats["frames_received"] as? Int ?? 0, stats["bytes_received"] as? Int ?? 0)
        }

        /// The frames the device's agent dropped so far, of every reason.
        static func dropTotal(_ fleet: FleetHarness, _ deviceID: String) throws -> Int {
            let drops = try #require(try fleet.deviceStats()[deviceID]?["drops"] as? [String: Any])
            return drops.values.compactMap { $0 as? Int }.reduce(0, +)
        }

        static func device(_ fleet: FleetHarness, _ deviceID: String) throws -> [String: Any] {
            try #require(try fleet.jsonObject(["device", deviceID])["device"] as? [String: Any])
        }

        @Test func nobodyWatching_noFrameBytesReachTheCoordinator_untilASnapshotWakesTheFlow() async throws {
            let (fleet, deviceID) = try await Self.cameraFleet()
            // Ten seconds of nobody watching: the counts rise, no frame byte arrives.
            let before = try Self.counts(fleet, deviceID)
            try await Task.sleep(for: .seconds(10))
            let after = try Self.counts(fleet, deviceID)
            #expect(after.received == before.received && after.receivedBytes == before.receivedBytes, "\(before) → \(after)")
            #expect(after.captured - before.captured >= 50, "the agent kept counting: \(before) → \(after)")
            let stats = try #require(try fleet.deviceStats()[deviceID])
            #expect((stats["frames_per_second"] as? Double ?? 0) > 5, "fps comes from the agent's counts: \(stats)")
            #expect(stats["live_flow"] as? Bool == false && stats["live_consumers"] as? Int == 0, "\(stats)")

            // A snapshot wakes the flow for as long as it waits, and gets a fresh frame.
            let snapshot = try fleet.cli(["snapshot", deviceID, "--json"], timeout: 10)
            #expect(snapshot.status == 0, "\(snapshot.error)")
            let frame = try JSONSerialization.jsonObject(with: Data(snapshot.output.utf8)) as? [String: Any]
            #expect((frame?["sequence"] as? Int ?? 0) > 0 && frame?["black"] as? Bool == false, "\(snapshot.output)")

            // Then it stops again: within a second of the snapshot, no more frames arrive.
            try await Task.sleep(for: .seconds(2))
            let settled = try Self.counts(fleet, deviceID)
            #expect(settled.received > after.received, "the snapshot's frames arrived: \(after) → \(settled)")
            try await Task.sleep(for: .seconds(3))
            let quiet = try Self.counts(fleet, deviceID)
            #expect(quiet.received == settled.received, "the flow stopped after the snapshot: \(settled) → \(quiet)")
            #expect(try Self.device(fleet, deviceID)["live_consumers"] as? [String] == [])

            // Both the start and the stop were said as events.
            let events = try SecondLaneIntegrationTests.AlertsTests.events(fleet).filter { $0["kind"] as? String == "live_frames" }
            #expect(events.contains { ($0["message"] as? String ?? "").contains("wanted (snapshot") }, "\(events)")
            #expect(events.contains { ($0["message"] as? String ?? "").contains("nobody wants") }, "\(events)")
        }

        @Test func twoViewers_oneStalled_theOtherGetsEveryFrame_andTheFlowStopsWhenBothLeave() async throws {
            let (fleet, deviceID) = try await Self.cameraFleet(fps: 15)
            let livePort = fleet.fleet.ports.livePort
            let context = ZMQContext()
            let keys = try fleet.operatorKeys("ana")
            let stalled = try fleet.socket(.sub, port: livePort, keys: keys, context: context)
            try stalled.set([.receiveQueue(messages: 1)])
            try stalled.subscribe(LiveTopic.frames(deviceID))
            let watching = try fleet.socket(.sub, port: livePort, keys: keys, context: context)
            try watching.subscribe(LiveTopic.frames(deviceID))

            try await fleet.waitUntil("the device lists its viewers and its flow", seconds: 10) {
                let device = try Self.device(fleet, deviceID)
                return device["live_consumers"] as? [String] == ["viewers"] && device["live_flow"] as? Bool == true
            }
            // Six seconds of frames to one viewer while the other reads nothing.
            let dropsBefore = try Self.dropTotal(fleet, deviceID)
            var sequences: [UInt64] = []
            let until = Date().addingTimeInterval(6)
            while Date() < until {
                guard watching.waitForInput(milliseconds: 200),
                    let message = try watching.receiveMultipart(dontWait: true, maxParts: 3), message.parts.count == 3
                else { continue }
                let header = try Capfleet_V1_FrameHeader(serializedBytes: message.parts[1].array)
                let whole =
                    String(decoding: message.parts[0].array, as: UTF8.self) == LiveTopic.frames(deviceID)
                    && header.deviceID == deviceID && Int(header.payloadSize) == message.parts[2].count
                    && header.payloadSize == UInt64(header.layout.width) * UInt64(header.layout.height) * 2
                if !whole { Issue.record("a malformed live frame: \(header)"); break }
                sequences.append(header.sequence)
            }
            let gaps = zip(sequences, sequences.dropFirst()).filter { $1 != $0 + 1 }
            #expect(sequences.count >= 60, "about 15 fps for 6 s: \(sequences.count) frames")
            #expect(gaps.allSatisfy { $1 > $0 }, "in order: \(gaps.prefix(5))")
            // Every frame the agent sent arrived: a gap is only a frame its agent counted as
            // dropped (late on a loaded host), never one the stalled viewer cost the other.
            let missing = gaps.reduce(0) { $0 + Int($1.1 - $1.0 - 1) }
            if missing > 0 {
                try await Task.sleep(for: .seconds(2))  // the agent's status after the window
                let dropped = try Self.dropTotal(fleet, deviceID) - dropsBefore
                #expect(missing <= dropped, "\(missing) frames missing at \(gaps.prefix(5)), \(dropped) dropped by the agent")
            }

            // Both leave: the flow stops within about a second and the listing says so.
            stalled.close()
            watching.close()
            try await fleet.waitUntil("the viewers are gone from the listing", seconds: 5) {
                try Self.device(fleet, deviceID)["live_consumers"] as? [String] == []
            }
            try await Task.sleep(for: .seconds(2))
            let first = try Self.counts(fleet, deviceID)
            try await Task.sleep(for: .seconds(3))
            let second = try Self.counts(fleet, deviceID)
            #expect(second.received == first.received && second.captured > first.captured, "\(first) → \(second)")
        }

        @Test func aCameraRecordedByTheCoordinator_sendsEachFrameOnce_andItsViewerSeesThemFromTheRecording() async throws {
            let (fleet, deviceID) = try await Self.cameraFleet(fps: 15)
            let context = ZMQContext()
            let viewer = try fleet.wantFrames(of: [deviceID], context: context)
            defer { viewer.close() }
            try await fleet.waitUntil("the viewer's flow runs on the live path", seconds: 10) {
                (try fleet.deviceStats()[deviceID]?["live_frames_sent"] as? Int ?? 0) > 10
            }
            try await fleet.waitUntil("the node's clock locks", seconds: 30) {
                try fleet.json(["clock"]).contains { $0["sync"] as? String == "locked" }
            }
            let takeID = try SecondLaneIntegrationTests.RecordingTests.start([deviceID], in: fleet)
            try await fleet.waitUntil("the take records", seconds: 15) {
                (try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)["devices"] as? [[String: Any]])?.first?["state"] as? String
                    == "recording"
            }
            // While it records, the viewer gets the recorded frames, and the live path sends none.
            try await Task.sleep(for: .seconds(2.5))  // past the start instant, and a status from after it
            while (try viewer.receiveMultipart(dontWait: true, maxParts: 3)) != nil {}
            let liveBefore = try #require(try fleet.deviceStats()[deviceID]?["live_frames_sent"] as? Int)
            var sequences: [UInt64] = []
            let until = Date().addingTimeInterval(4)
            while Date() < until {
                guard viewer.waitForInput(milliseconds: 200),
                    let message = try viewer.receiveMultipart(dontWait: true, maxParts: 3), message.parts.count == 3
                else { continue }
                let header = try Capfleet_V1_FrameHeader(serializedBytes: message.parts[1].array)
                #expect(header.flags & UInt32(Capfleet_V1_FrameFlag.recording.rawValue) != 0, "a recorded frame: \(header.flags)")
                sequences.append(header.sequence)
            }
            try await Task.sleep(for: .seconds(1.5))  // a status from after the window
            let liveAfter = try #require(try fleet.deviceStats()[deviceID]?["live_frames_sent"] as? Int)
            #expect(sequences.count >= 40, "the viewer saw the take's frames: \(sequences.count)")
            #expect(zip(sequences, sequences.dropFirst()).allSatisfy { $1 > $0 }, "in order")
            #expect(liveAfter == liveBefore, "no frame crossed twice: the live path sent \(liveAfter - liveBefore) while the take recorded")

            // Once the take stops, the viewer's frames come on the live path again; the take kept them all.
            let stopped = try fleet.cli(["record", "stop", takeID], timeout: 60)
            #expect(stopped.status == 0, "\(stopped.error)")
            let part = try #require((try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)["devices"] as? [[String: Any]])?.first)
            // The recording path loses nothing: the only gaps are slots the camera itself skipped
            // (a synthetic camera on a busy machine may miss one, and says so as discontinuity).
            let cameraSkipped = (try fleet.deviceStats()[deviceID]?["drops"] as? [String: Any])?["discontinuity"] as? Int ?? 0
            #expect(
                (part["frames"] as? Int ?? 0) >= sequences.count
                    && SecondLaneIntegrationTests.RecordingTests.dropTotal(part) <= cameraSkipped, "\(part); the camera skipped \(cameraSkipped)")
            try await fleet.waitUntil("the live path carries the viewer's frames again", seconds: 10) {
                (try fleet.deviceStats()[deviceID]?["live_frames_sent"] as? Int ?? 0) > liveAfter + 10
            }
        }

        @Test func view_stoppedBySIGTERM_exitsAndTakesItsPlayerWithIt() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("cam", fps: 15, extra: ["--synthetic-format", "160x120:YUYV"])
            var deviceID = ""
            try await fleet.waitUntil("the camera registers", seconds: 30) {
                deviceID = try fleet.deviceStats().keys.first ?? ""
                return !deviceID.isEmpty
            }
            // A player of our own: it says its process id and reads the frames it is given.
            let player = fleet.directory + "/player.sh"
            let playerID = fleet.directory + "/player.pid"
            try "#!/bin/sh\necho $$ > \(playerID)\nexec cat > /dev/null\n".write(toFile: player, atomically: true, encoding: .utf8)
            chmod(player, 0o755)
            let view = Process()
            view.executableURL = URL(fileURLWithPath: try CapfleetBinary.checked())
            view.arguments = [
                "view", deviceID, "--player", player, "--coordinator", "127.0.0.1:\(fleet.operatorPort)", "--credential",
                try fleet.credential(for: "ana"),
            ]
            var environment = ProcessInfo.processInfo.environment
            environment["DISPLAY"] = ":99"
            view.environment = environment
            view.standardError = FileHandle.nullDevice
            try view.run()
            try await fleet.waitUntil("the player starts with the first frame", seconds: 30) {
                (try? String(contentsOfFile: playerID, encoding: .utf8)).map { !$0.isEmpty } ?? false
            }
            let pid = try #require(Int32((try String(contentsOfFile: playerID, encoding: .utf8)).trimmingCharacters(in: .whitespacesAndNewlines)))
            kill(view.processIdentifier, SIGTERM)
            try await fleet.waitUntil("capfleet view exits", seconds: 10) { !view.isRunning }
            #expect(view.terminationStatus == 128 + SIGTERM, "exits as a process ended by SIGTERM says it was")
            // Its player heard the signal too and was reaped: no such process any more.
            try await fleet.waitUntil("the player is gone", seconds: 5) { kill(pid, 0) != 0 && errno == ESRCH }
        }

        @Test func view_writesAFileOfRawFrames_blackWithoutConsent() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("cam", fps: 15, extra: ["--synthetic-format", "160x120:YUYV"])
            var deviceID = ""
            try await fleet.waitUntil("the camera registers", seconds: 30) {
                deviceID = try fleet.deviceStats().keys.first ?? ""
                return !deviceID.isEmpty
            }
            let output = fleet.directory + "/view.yuyv"
            let viewed = try fleet.cli(["view", deviceID, "-o", output, "--frames", "10"], timeout: 30)
            #expect(viewed.status == 0, "\(viewed.error)")
            #expect(viewed.error.contains("-pixel_format yuyv422 -video_size 160x120"), "says how to play it: \(viewed.error)")
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: output)))
            let expectedBytes = 10 * 160 * 120 * 2
            #expect(bytes.count == expectedBytes)
            // No consent: limited-range black, Y 16 and U/V 128, in YUYV's byte order.
            let black = stride(from: 0, to: bytes.count, by: 2).allSatisfy { bytes[$0] == 16 && bytes[$0 + 1] == 128 }
            #expect(black, "frames of a device without consent are black")
        }
    }
}
