import FleetBus
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension SecondLaneIntegrationTests {
    /// The coordinator's `/metrics` as Prometheus sees it: fetched with curl and read by
    /// Python's prometheus_client text-format parser.
    @Suite struct MetricsTests {
        /// One scrape: sample name with labels → (type, value).
        struct Scrape {
            var samples: [String: (type: String, value: Double)]

            func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
                samples[Scrape.key(name, labels)]?.value
            }

            func matching(_ name: String, where predicate: ([String: String]) -> Bool = { _ in true }) -> [(labels: [String: String], value: Double)]
            {
                samples.compactMap { key, sample in
                    let (sampleName, labels) = Scrape.split(key)
                    return sampleName == name && predicate(labels) ? (labels, sample.value) : nil
                }
            }

            static func key(_ name: String, _ labels: [String: String]) -> String {
                name + "{" + labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",") + "}"
            }

            static func split(_ key: String) -> (String, [String: String]) {
                let name = String(key.prefix { $0 != "{" })
                let inner = key.dropFirst(name.count + 1).dropLast()
                var labels: [String: String] = [:]
                for pair in inner.split(separator: ",") {
                    let parts = pair.split(separator: "=", maxSplits: 1)
                    if parts.count == 2 { labels[String(parts[0])] = String(parts[1]) }
                }
                return (name, labels)
            }
        }

        /// Parses the exposition with prometheus_client and prints one JSON object per sample.
        static let parser = """
            import json, sys
            from prometheus_client.parser import text_string_to_metric_families
            for family in text_string_to_metric_families(sys.stdin.read()):
                for sample in family.samples:
                    print(json.dumps({"name": sample.name, "labels": sample.labels, "value": sample.value, "type": family.type}))
            """

        static func python() throws -> String { try pythonInterpreter(importing: "prometheus_client") }

        static func run(_ command: String) throws -> (status: Int32, output: String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.arguments = ["-c", command]
            let out = Pipe()
            process.standardOutput = out
            process.standardError = FileHandle.nullDevice
            try process.run()
            let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, output)
        }

        static func scrape(_ fleet: FleetHarness) throws -> Scrape {
            let python = try python()
            let parserPath = fleet.directory + "/parse_metrics.py"
            if !FileManager.default.fileExists(atPath: parserPath) {
                try parser.write(toFile: parserPath, atomically: true, encoding: .utf8)
            }
            let result = try run("set -o pipefail; curl -sf --max-time 5 http://127.0.0.1:\(fleet.metricsPort)/metrics | \(python) \(parserPath)")
            guard result.status == 0 else { throw HarnessError("scrape failed (exit \(result.status))") }
            var samples: [String: (String, Double)] = [:]
            for line in result.output.split(separator: "\n") {
                guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    let name = object["name"] as? String, let labels = object["labels"] as? [String: String],
                    let value = object["value"] as? Double, let type = object["type"] as? String
                else { continue }
                samples[Scrape.key(name, labels)] = (type, value)
            }
            return Scrape(samples: samples)
        }

        @Test func metricsEndpoint_parsesAsPrometheusText_countersOnlyIncrease() async throws {
            let fleet = try FleetHarness()
            let coordinator = try fleet.startCoordinator()
            try fleet.startAgent("scraped", fps: 30)
            let leaving = try fleet.startAgent("leaving")
            try await fleet.waitUntil("both agents stream", seconds: 25) {
                try fleet.deviceStats().values.filter { ($0["frames_captured"] as? Int ?? 0) > 0 }.count == 2
            }
            let nodes = try fleet.json(["nodes"])
            let scrapedNode = try #require(nodes.first { $0["name"] as? String == "scraped" }?["node_id"] as? String)
            let leavingNode = try #require(nodes.first { $0["name"] as? String == "leaving" }?["node_id"] as? String)

            var scrapes: [Scrape] = []
            try await fleet.waitUntil("the first scrape shows both nodes up", seconds: 10) {
                let scrape = try Self.scrape(fleet)
                guard scrape.value("capfleet_node_up", ["node": leavingNode, "name": "leaving"]) == 1,
                    scrape.value("capfleet_node_up", ["node": scrapedNode, "name": "scraped"]) == 1
                else { return false }
                scrapes.append(scrape)
                return true
            }
            let first = scrapes[0]
            // Prometheus' own checker (Debian's prometheus package) finds nothing wrong.
            let promtool = try Self.run(
                "set -o pipefail; curl -sf --max-time 5 http://127.0.0.1:\(fleet.metricsPort)/metrics | promtool check metrics 2>&1; echo \"exit $?\""
            )
            #expect(promtool.output.hasSuffix("exit 0\n"), "promtool check metrics: \(promtool.output)")
            let frames = first.matching("capfleet_frames_captured_total")
            #expect(frames.count == 2, "one frame counter per device: \(frames)")
            #expect(frames.allSatisfy { $0.value > 0 })
            #expect(first.samples.filter { $0.key.hasPrefix("capfleet_frames_captured_total") }.allSatisfy { $0.value.type == "counter" })
            #expect(first.matching("capfleet_frames_dropped_total").count == 8, "four reasons per device")
            #expect(first.value("capfleet_node_pressure_level", ["node": scrapedNode]) != nil, "the level is there while the node is online")
            #expect((first.value("capfleet_events_total", ["kind": "node_online"]) ?? 0) >= 2)
            #expect(first.samples["capfleet_node_pressure_level{node=\(scrapedNode)}"]?.type == "gauge")

            // A coordinator that stops reading for a while: the agents' send queues fill and
            // frames are dropped (the synthetic camera runs out of buffers held by the queue).
            // Someone watches both cameras, so their frames are on their way to it.
            let viewerContext = ZMQContext()
            let viewer = try fleet.wantFrames(of: Array(try fleet.deviceStats().keys), context: viewerContext)
            defer { viewer.close() }
            try await fleet.waitUntil("both cameras' frames flow", seconds: 10) {
                try fleet.deviceStats().values.filter { $0["live_flow"] as? Bool == true }.count == 2
            }
            kill(coordinator.process.processIdentifier, SIGSTOP)
            try await Task.sleep(for: .seconds(3))
            kill(coordinator.process.processIdentifier, SIGCONT)
            try await fleet.waitUntil("drops reach /metrics", seconds: 15) {
                let scrape = try Self.scrape(fleet)
                scrapes.append(scrape)
                return scrape.matching("capfleet_frames_dropped_total").contains { $0.value > 0 }
            }
            let dropped = scrapes.last!.matching("capfleet_frames_dropped_total").filter { $0.value > 0 }
            #expect(dropped.allSatisfy { ["late", "out_of_buffers", "discontinuity", "encoder_late"].contains($0.labels["reason"] ?? "") })

            // A node that goes away: node_up falls to 0 and its pressure level disappears.
            leaving.kill()
            try await fleet.waitUntil("the departed node is down", seconds: 15) {
                let scrape = try Self.scrape(fleet)
                scrapes.append(scrape)
                return scrape.value("capfleet_node_up", ["node": leavingNode, "name": "leaving"]) == 0
            }
            let last = scrapes.last!
            #expect(last.value("capfleet_node_pressure_level", ["node": leavingNode]) == nil, "no stale level for an offline node")
            #expect(last.value("capfleet_node_pressure_level", ["node": scrapedNode]) != nil)
            #expect((last.value("capfleet_events_total", ["kind": "node_offline"]) ?? 0) >= 1)

            // Counters never go down between scrapes, and the streaming device's keep rising.
            for (earlier, later) in zip(scrapes, scrapes.dropFirst()) {
                for (key, sample) in earlier.samples where sample.type == "counter" {
                    if let next = later.samples[key] {
                        #expect(next.value >= sample.value, "\(key) went from \(sample.value) to \(next.value)")
                    } else {
                        Issue.record("counter \(key) vanished between scrapes")
                    }
                }
            }
            let scrapedFrames = { (scrape: Scrape) in
                scrape.matching("capfleet_frames_captured_total") { $0["node"] == scrapedNode }.first?.value ?? 0
            }
            #expect(scrapedFrames(last) > scrapedFrames(first))
        }

        @Test func metricsEndpoint_answersOtherPathsAndMethodsClearly() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try await fleet.waitUntil("the endpoint answers", seconds: 15) {
                try Self.run("curl -sf --max-time 2 -o /dev/null http://127.0.0.1:\(fleet.metricsPort)/metrics").status == 0
            }
            let missing = try Self.run("curl -s --max-time 2 -o /dev/null -w '%{http_code}' http://127.0.0.1:\(fleet.metricsPort)/nothing-here")
            #expect(missing.output == "404")
            let posted = try Self.run(
                "curl -s --max-time 2 -o /dev/null -w '%{http_code}' -X POST -d x http://127.0.0.1:\(fleet.metricsPort)/metrics")
            #expect(posted.output == "405")
            let head = try Self.run("curl -sI --max-time 2 http://127.0.0.1:\(fleet.metricsPort)/metrics")
            #expect(head.output.contains("text/plain; version=0.0.4"))
        }
    }
}
