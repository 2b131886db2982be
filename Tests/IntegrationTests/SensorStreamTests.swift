import FleetBus
import FleetProtocol
import Foundation
import Testing

extension IntegrationTests {
    /// Sensor streams end to end (proto-docs/sensors.md): the example IMU sender, a second
    /// process on the agent's host, sends 200 samples a second to the agent's Unix socket; an
    /// operator's telemetry subscription hears them on `data.<node>.<stream>` at their fleet
    /// times (the agent's clock skewed by +3.2 s and 40 ppm), only while consent is granted;
    /// malformed messages are refused and counted where an operator looks.
    @Suite struct SensorStreamTests {
        static var sender: String {
            SecondLaneIntegrationTests.TelemetrySubscriberTests.repositoryRoot.appendingPathComponent("proto-docs/examples/sensor_sender.py").path
        }

        /// Runs the example sender for `seconds` at 200 Hz; its status.
        static func send(socket: String, seconds: Double) throws -> Int32 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                try SecondLaneIntegrationTests.TelemetrySubscriberTests.python(), sender, "--socket", socket, "--stream", "imu0", "--rate", "200",
                "--seconds", "\(seconds)",
            ]
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            return process.terminationStatus
        }

        /// What arrives on the subscription within `seconds`: sensor batches and device statuses.
        static func drain(
            _ socket: ZMQSocket, seconds: Double
        ) throws -> (data: [Capfleet_V1_SensorData], devices: [Capfleet_V1_DeviceStatus], nodes: [Capfleet_V1_NodeStatus]) {
            var data: [Capfleet_V1_SensorData] = [], devices: [Capfleet_V1_DeviceStatus] = [], nodes: [Capfleet_V1_NodeStatus] = []
            let end = Date().addingTimeInterval(seconds)
            while Date() < end {
                guard socket.waitForInput(milliseconds: 100), let (parts, _) = try socket.receiveMultipart(dontWait: true), parts.count == 2 else {
                    continue
                }
                let topic = String(decoding: parts[0].array, as: UTF8.self)
                if topic.hasPrefix("data.") { data.append(try Capfleet_V1_SensorData(serializedBytes: parts[1].array)) }
                if topic.hasPrefix("device.") { devices.append(try Capfleet_V1_DeviceStatus(serializedBytes: parts[1].array)) }
                if topic.hasPrefix("node.") { nodes.append(try Capfleet_V1_NodeStatus(serializedBytes: parts[1].array)) }
            }
            return (data, devices, nodes)
        }

        struct SensorTake {
            let start: Int
            let stop: Int
            let sensors: [String]
            /// The sensor track's entries in the camera's files.
            let entries: [[String: Any]]
        }

        /// A take of `camera` and `imu` while the example sender runs through it.
        static func takeWithSensor(
            _ fleet: FleetHarness, camera: String, imu: String, socket: String, store: String, subscriber: ZMQSocket
        ) async throws -> SensorTake {
            let sending = Task.detached { try Self.send(socket: socket, seconds: 8) }
            // The take starts once readings flow (Python and protoc take seconds on a loaded host).
            try await fleet.waitUntil("the sender's readings flow", seconds: 20) { try !Self.drain(subscriber, seconds: 0.3).data.isEmpty }
            let started = try fleet.cli(["record", "start", camera, imu, "--store", store, "--json"], timeout: 15)
            guard started.status == 0, let take = try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any],
                let id = take["id"] as? String
            else {
                throw HarnessError("record start failed: \(started.output)\(started.error)")
            }
            try await Task.sleep(for: .milliseconds(2500))
            let stopped = try fleet.cli(["record", "stop", id], timeout: 20)
            guard stopped.status == 0 else { throw HarnessError("record stop failed: \(stopped.error)") }
            #expect(try await sending.value == 0)
            // A part still uploading (a loaded host) has its last segment open: read it once stored.
            var shown: [String: Any] = [:]
            try await fleet.waitUntil("the camera's part is stored", seconds: 30) {
                shown = try fleet.jsonObject(["recordings", "show", id])
                let parts = shown["devices"] as? [[String: Any]] ?? []
                let segments = shown["segments"] as? [[String: Any]] ?? []
                return !parts.isEmpty && parts.allSatisfy { $0["state"] as? String == "stopped" }
                    && !segments.isEmpty && segments.allSatisfy { $0["state"] as? String != "open" }
            }
            let paths = (shown["segments"] as? [[String: Any]] ?? []).filter { $0["device_id"] as? String == camera }.compactMap {
                $0["path"] as? String
            }
            let track = try SecondLaneIntegrationTests.RecordingTests.metadataTrack(in: paths, track: 2)
            let start = shown["start_fleet_ns"] as? Int ?? 0
            let entries = try track.compactMap { entry -> [String: Any]? in
                guard let json = try JSONSerialization.jsonObject(with: Data(entry.json.utf8)) as? [String: Any] else { return nil }
                // Each entry sits in the file at its first reading's time since the take's start (ms).
                let first = (json["readings"] as? [[String: Any]])?.first?["fleet_ns"] as? Int ?? 0
                #expect(
                    abs(entry.milliseconds - Double(first - start) / 1e6) <= 1, "entry at \(entry.milliseconds) ms, reading at \(first - start) ns")
                return json
            }
            return SensorTake(
                start: start, stop: shown["stop_fleet_ns"] as? Int ?? 0,
                sensors: shown["sensors"] as? [String] ?? [], entries: entries.filter { $0["kind"] as? String == "sensor" })
        }

        @Test func imuSamplesFromAnotherProcess_reachTelemetryInFleetTime_onlyWithConsent_andMalformedOnesAreCounted() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent(
                "rig", extra: ["--test-clock-skew", "+3.2s,+40ppm", "--sensor-stream", "imu0", "--sensor-stream", "cues"])
            try await fleet.waitUntil("the clock locks", seconds: 30) { agent.log.contains("clock.state=locked") }
            let socketPath = fleet.directory + "/rig/sensors.sock"
            var mode = stat()
            try #require(stat(socketPath, &mode) == 0, "the agent made its sensor socket at \(socketPath)")
            #expect(mode.st_mode & 0o777 == 0o660 && mode.st_mode & S_IFMT == S_IFSOCK, "a Unix socket for the agent's user and group")

            let devices = try fleet.json(["devices"])
            let sensors = devices.filter { $0["kind"] as? String == "sensor" }.compactMap { $0["device_id"] as? String }.sorted()
            try #require(sensors.count == 2, "both streams are devices of their own kind: \(devices)")
            let imu = try #require(sensors.first { $0.hasSuffix("-imu0") })
            #expect(imu.hasPrefix("sen-"))
            let nodeID = try #require(devices.first?["node_id"] as? String)

            let context = ZMQContext()
            let subscriber = try fleet.socket(.sub, port: fleet.telemetryPort, keys: fleet.operatorKeys("vi"), context: context)
            defer { subscriber.close() }
            for prefix in ["data.", "device.\(imu)", "node."] { try subscriber.subscribe(prefix) }
            try await Task.sleep(for: .milliseconds(300))

            // No consent yet: the samples stay on the host, counted.
            #expect(try Self.send(socket: socketPath, seconds: 1) == 0)
            let withheld = try Self.drain(subscriber, seconds: 1.5)
            #expect(withheld.data.isEmpty, "nothing of a stream without consent leaves its host")
            #expect(
                withheld.devices.last.map { $0.samplesWithheld >= 150 && $0.kind == .sensor && !$0.realFrames } == true,
                "\(withheld.devices.last.map { "\($0)" } ?? "no status")")

            try fleet.grantConsent(imu)
            try await Task.sleep(for: .milliseconds(300))
            let offset = IntegrationTests.ClockSyncTests.wallMinusMonotonic()
            // The CLI follows the stream, one JSON object per reading: the sender runs long
            // enough for a CLI that a loaded machine starts slowly to subscribe before it ends.
            let following = Task.detached { try Self.send(socket: socketPath, seconds: 6) }
            let followed = try fleet.cli(["sensor", imu, "--count", "20", "--json"], timeout: 10)
            #expect(try await following.value == 0)
            let lines = followed.output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            #expect(followed.status == 0 && lines.count == 20, "\(followed.error)")
            #expect(
                lines.allSatisfy {
                    ($0["values"] as? [String: Double])?.keys.sorted() == ["ax", "ay", "az", "gx", "gy", "gz"] && $0["fleet_ns"] is Int
                })
            // Then 2 s of it on the subscription, counted (what came while the CLI followed first let go).
            _ = try Self.drain(subscriber, seconds: 0.5)
            #expect(try Self.send(socket: socketPath, seconds: 2) == 0)
            let granted = try Self.drain(subscriber, seconds: 1)
            let readings = granted.data.flatMap(\.readings)
            #expect(granted.data.allSatisfy { $0.nodeID == nodeID && $0.deviceID == imu && $0.channels == ["ax", "ay", "az", "gx", "gy", "gz"] })
            #expect(readings.count >= 380 && readings.count <= 401, "about 2 s at 200 Hz: \(readings.count)")
            // The fleet time of each reading is the instant the sender stamped, read as fleet
            // time does (the coordinator's wall clock), whatever the agent's own clock says.
            let errors = readings.map { Double($0.fleetTimeNs) - (Double($0.monotonicNs) + offset) }
            let worst = errors.map(abs).max() ?? .infinity
            print("sensor streams: \(readings.count) readings in \(granted.data.count) batches; fleet time off by at most \(Int(worst)) ns")
            #expect(worst < 2_000_000, "fleet time off by \(worst) ns")
            #expect(zip(readings, readings.dropFirst()).allSatisfy { $0.monotonicNs < $1.monotonicNs }, "in order")

            // Malformed: another process's garbage, a stream not offered, a sample short of
            // values, and one stamped with the wall clock.
            let push = try ZMQSocket(context: context, type: .push)
            defer { push.close() }
            try push.connect("ipc://" + socketPath)
            func samples(_ stream: String, _ time: UInt64, _ values: [Double]) throws -> [UInt8] {
                try Capfleet_V1_SensorSamples.with {
                    $0.stream = stream
                    $0.channels = ["ax", "ay", "az", "gx", "gy", "gz"]
                    $0.samples = [
                        .with { sample in
                            sample.monotonicNs = time; sample.values = values
                        }
                    ]
                }.serializedBytes()
            }
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let monotonic = UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
            _ = try push.send([0xFF, 0x00, 0x13])
            _ = try push.send(try samples("gps", monotonic, [1, 2, 3, 4, 5, 6]))
            _ = try push.send(try samples("imu0", monotonic, [1, 2, 3]))
            _ = try push.send(try samples("imu0", UInt64(Date().timeIntervalSince1970 * 1e9), [1, 2, 3, 4, 5, 6]))
            try await fleet.waitUntil("the refusals are counted", seconds: 10) {
                let heard = try Self.drain(subscriber, seconds: 1.2)
                return heard.devices.contains { $0.samplesRefused == 2 }
                    && heard.nodes.contains { $0.nodeID == nodeID && $0.sensorMessagesRefused == 2 }
            }
            #expect(agent.log.contains("sensor samples refused"), "the agent says why")
            // …and Prometheus counts them by outcome.
            try await fleet.waitUntil("the metrics count the refusals", seconds: 10) {
                let scrape = try SecondLaneIntegrationTests.MetricsTests.scrape(fleet)
                let labels = ["device": imu, "node": nodeID]
                return scrape.value("capfleet_sensor_samples_total", labels.merging(["outcome": "refused"]) { $1 }) == 2
                    && (scrape.value("capfleet_sensor_samples_total", labels.merging(["outcome": "received"]) { $1 }) ?? 0) >= 400
            }

            // In takes: the readings go into the camera's file, kept on the agent (the
            // default) and on the coordinator.
            let camera = try #require(devices.first { $0["kind"] as? String == "synthetic" }?["device_id"] as? String)
            try fleet.grantConsent(camera)
            for store in ["agent", "coordinator"] {
                let take = try await Self.takeWithSensor(fleet, camera: camera, imu: imu, socket: socketPath, store: store, subscriber: subscriber)
                // Batches that came before the camera's first frame of the take once went
                // nowhere on the agent (2026-11-29); if none is in the file, the logs say why.
                if take.entries.isEmpty {
                    print("sensor streams: a \(store)-held take held no sensor entry; logs: \(fleet.logLines(containing: "take"))")
                }
                let readings = take.entries.flatMap { $0["readings"] as? [[String: Any]] ?? [] }
                let times = readings.compactMap { $0["fleet_ns"] as? Int }
                print(
                    "sensor streams: a \(store)-held take of \(Double(take.stop - take.start) / 1e9) s holds \(readings.count) readings in \(take.entries.count) entries"
                )
                #expect(take.sensors == [imu], "the take names its stream: \(take.sensors)")
                #expect(take.entries.allSatisfy { $0["device_id"] as? String == imu && ($0["channels"] as? [String])?.count == 6 })
                #expect(times.allSatisfy { $0 >= take.start && $0 < take.stop }, "only readings within the take")
                // 200 Hz over the take, less what the last batch after the stop held.
                let expected = Double(take.stop - take.start) / 1e9 * 200
                #expect(
                    Double(readings.count) >= expected * 0.9 && Double(readings.count) <= expected + 2, "\(readings.count) of about \(Int(expected))")
                #expect(times == times.sorted())
            }
            let cameraless = try fleet.cli(["record", "start", imu])
            #expect(cameraless.status != 0 && cameraless.error.contains("at least one camera"), "\(cameraless.error)")

            // Revoked: nothing more leaves.
            #expect(try fleet.cli(["consent", "revoke", imu, "--reason", "rig handed back"]).status == 0)
            _ = try Self.drain(subscriber, seconds: 0.5)  // what the takes' readings left queued
            #expect(try Self.send(socket: socketPath, seconds: 1) == 0)
            #expect(try Self.drain(subscriber, seconds: 1).data.isEmpty, "a revoked stream sends nothing")

            // A sensor stream takes no camera command.
            #expect(try fleet.cli(["lock", imu]).status == 0)
            let focus = try fleet.cli(["focus", imu, "--mode", "auto"])
            #expect(focus.status != 0 && focus.error.contains("sensor stream"), "\(focus.error)")
        }
    }
}
