import FleetProtocol
import Foundation
import Testing

@testable import FleetCoordinator

/// The fleet's series as a scrape reads them, after the telemetry reporter's updates: counters
/// follow the cumulative counts and never go down, gauges hold the latest status, and series
/// appear when there is something to say.
@Suite struct FleetMetricsTests {
    /// The value of the sample `name{labels}` in the exposition, where `labels` is the label
    /// text exactly as written (`device="cam-1",node="node-1"`).
    static func sample(_ metrics: FleetMetrics, _ name: String, _ labels: String) -> Double? {
        let text = String(decoding: metrics.exposition(), as: UTF8.self)
        let prefix = "\(name){\(labels)} "
        return text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Double($0.dropFirst(prefix.count)) }
    }

    static func device(_ id: String, node: String, frames: UInt64, late: UInt64 = 0, rate: Double = 0) -> Capfleet_V1_DeviceStatus {
        .with {
            $0.deviceID = id
            $0.nodeID = node
            $0.online = true
            $0.streaming = true
            $0.framesCaptured = frames
            $0.bytesCaptured = frames < .max / 100 ? frames * 100 : .max
            $0.framesPerSecond = 1
            $0.drops.late = late
            $0.activeFrameRate = rate
        }
    }

    @Test func deviceCounters_followTheCumulativeCounts_neverGoDown_andStartAtZero() {
        let metrics = FleetMetrics()
        let labels = #"device="cam-1",node="node-1""#
        metrics.record(devices: [Self.device("cam-1", node: "node-1", frames: 10)])
        #expect(Self.sample(metrics, "capfleet_frames_captured_total", labels) == 10)
        #expect(Self.sample(metrics, "capfleet_bytes_captured_total", labels) == 1000)
        #expect(Self.sample(metrics, "capfleet_frames_received_total", labels) == 0, "there from the first scrape")
        #expect(Self.sample(metrics, "capfleet_frames_dropped_total", labels + #",reason="late""#) == 0)

        metrics.record(devices: [Self.device("cam-1", node: "node-1", frames: 25, late: 3)])
        #expect(Self.sample(metrics, "capfleet_frames_captured_total", labels) == 25)
        #expect(Self.sample(metrics, "capfleet_frames_dropped_total", labels + #",reason="late""#) == 3)
        // A smaller count (reports crossing, an agent that restarted) leaves the counter alone.
        metrics.record(devices: [Self.device("cam-1", node: "node-1", frames: 4)])
        #expect(Self.sample(metrics, "capfleet_frames_captured_total", labels) == 25)
        metrics.record(devices: [Self.device("cam-1", node: "node-1", frames: 30)])
        #expect(Self.sample(metrics, "capfleet_frames_captured_total", labels) == 30)
        // A forged count beyond Int64 stops at its largest value instead of wrapping negative.
        metrics.record(devices: [Self.device("cam-1", node: "node-1", frames: .max)])
        #expect(Self.sample(metrics, "capfleet_frames_captured_total", labels) == Double(Int64.max))
    }

    @Test func sensorSamples_areCountedByOutcome_forSensorStreamsOnly_andAnAgentRestartAddsOn() {
        let metrics = FleetMetrics()
        func stream(received: UInt64, refused: UInt64) -> Capfleet_V1_DeviceStatus {
            .with {
                $0.deviceID = "sen-1-imu0"
                $0.nodeID = "node-1"
                $0.online = true
                $0.kind = .sensor
                $0.samplesReceived = received
                $0.samplesRefused = refused
            }
        }
        let labels = #"device="sen-1-imu0",node="node-1""#
        metrics.record(devices: [Self.device("cam-1", node: "node-1", frames: 10), stream(received: 400, refused: 2)])
        #expect(Self.sample(metrics, "capfleet_sensor_samples_total", labels + #",outcome="received""#) == 400)
        #expect(Self.sample(metrics, "capfleet_sensor_samples_total", labels + #",outcome="refused""#) == 2)
        #expect(Self.sample(metrics, "capfleet_sensor_samples_total", labels + #",outcome="withheld""#) == 0, "every outcome from the start")
        #expect(Self.sample(metrics, "capfleet_sensor_samples_total", #"device="cam-1",node="node-1",outcome="received""#) == nil)
        metrics.record(devices: [stream(received: 600, refused: 2)])
        #expect(Self.sample(metrics, "capfleet_sensor_samples_total", labels + #",outcome="received""#) == 600)
        // The agent restarted: its count began again at 0; the counter adds the new process's.
        metrics.record(devices: [stream(received: 50, refused: 0)])
        #expect(Self.sample(metrics, "capfleet_sensor_samples_total", labels + #",outcome="received""#) == 650)
        #expect(Self.sample(metrics, "capfleet_sensor_samples_total", labels + #",outcome="refused""#) == 2)
    }

    @Test func aGenICamStreamsTransport_isCountedByOutcome_andOnlyWhereReported() {
        let metrics = FleetMetrics()
        func camera(completed: UInt64, incomplete: UInt64, missing: UInt64) -> Capfleet_V1_DeviceStatus {
            .with {
                $0.deviceID = "genicam-Acme-A1-42"
                $0.nodeID = "node-1"
                $0.online = true
                $0.kind = .genicam
                $0.streamTransport = .with {
                    $0.framesCompleted = completed
                    $0.framesIncomplete = incomplete
                    $0.packetsMissing = missing
                }
            }
        }
        let labels = #"device="genicam-Acme-A1-42",node="node-1""#
        metrics.record(devices: [Self.device("cam-1", node: "node-1", frames: 10), camera(completed: 90, incomplete: 4, missing: 12)])
        #expect(Self.sample(metrics, "capfleet_stream_frames_total", labels + #",outcome="completed""#) == 90)
        #expect(Self.sample(metrics, "capfleet_stream_frames_total", labels + #",outcome="incomplete""#) == 4)
        #expect(Self.sample(metrics, "capfleet_stream_frames_total", labels + #",outcome="underrun""#) == 0, "every outcome from the start")
        #expect(Self.sample(metrics, "capfleet_stream_packets_total", labels + #",outcome="missing""#) == 12)
        #expect(Self.sample(metrics, "capfleet_stream_frames_total", #"device="cam-1",node="node-1",outcome="completed""#) == nil)
        // The agent restarted and opened the camera again: its counts add on.
        metrics.record(devices: [camera(completed: 5, incomplete: 1, missing: 2)])
        #expect(Self.sample(metrics, "capfleet_stream_frames_total", labels + #",outcome="completed""#) == 95)
        #expect(Self.sample(metrics, "capfleet_stream_packets_total", labels + #",outcome="missing""#) == 14)
    }

    @Test func microphoneMeters_perChannel_clippedCountsAddOn_andTheClockOnceMeasured() {
        let metrics = FleetMetrics()
        func microphone(peak: Double, clipped: UInt64, ppm: Double?) -> Capfleet_V1_DeviceStatus {
            .with {
                $0.deviceID = "alsa-C920-0"
                $0.nodeID = "node-1"
                $0.online = true
                $0.kind = .alsa
                $0.audioLevels = [
                    .with {
                        $0.peakDbfs = peak
                        $0.rmsDbfs = -23
                        $0.clipped = clipped
                    },
                    .with {
                        $0.peakDbfs = -120
                        $0.rmsDbfs = -120
                    },
                ]
                if let ppm {
                    $0.audioClock = .with {
                        $0.rateMeasured = true
                        $0.ratePpm = ppm
                    }
                }
            }
        }
        let labels = #"device="alsa-C920-0",node="node-1""#
        metrics.record(devices: [microphone(peak: -1, clipped: 3, ppm: nil)])
        #expect(Self.sample(metrics, "capfleet_microphone_peak_dbfs", labels + #",channel="0""#) == -1)
        #expect(Self.sample(metrics, "capfleet_microphone_rms_dbfs", labels + #",channel="1""#) == -120)
        #expect(Self.sample(metrics, "capfleet_microphone_clipped_samples_total", labels + #",channel="0""#) == 3)
        #expect(Self.sample(metrics, "capfleet_microphone_clock_rate_ppm", labels) == nil, "not measured yet")
        metrics.record(devices: [microphone(peak: -6, clipped: 5, ppm: 21.5)])
        #expect(Self.sample(metrics, "capfleet_microphone_peak_dbfs", labels + #",channel="0""#) == -6)
        #expect(Self.sample(metrics, "capfleet_microphone_clipped_samples_total", labels + #",channel="0""#) == 5)
        #expect(Self.sample(metrics, "capfleet_microphone_clock_rate_ppm", labels) == 21.5)
        // The agent restarted: its count began again; the counter adds it on.
        metrics.record(devices: [microphone(peak: -6, clipped: 1, ppm: 21.5)])
        #expect(Self.sample(metrics, "capfleet_microphone_clipped_samples_total", labels + #",channel="0""#) == 6)
    }

    @Test func deviceGauges_holdTheLatestStatus_andAFrameRateOnceThereIsOne() {
        let metrics = FleetMetrics()
        let labels = #"device="cam-1",node="node-1""#
        metrics.record(devices: [Self.device("cam-1", node: "node-1", frames: 1)])
        #expect(Self.sample(metrics, "capfleet_device_streaming", labels) == 1)
        #expect(Self.sample(metrics, "capfleet_device_active_frame_rate", labels) == nil)
        var stopped = Self.device("cam-1", node: "node-1", frames: 2, rate: 15)
        stopped.streaming = false
        stopped.interruption.reason = .deviceDisconnected
        metrics.record(devices: [stopped])
        #expect(Self.sample(metrics, "capfleet_device_streaming", labels) == 0)
        #expect(Self.sample(metrics, "capfleet_device_interrupted", labels) == 1)
        #expect(Self.sample(metrics, "capfleet_device_active_frame_rate", labels) == 15)
    }

    /// A camera moved to another host is another series; the old one keeps its last values.
    @Test func aDeviceOnAnotherNode_countsInASeriesOfItsOwn() {
        let metrics = FleetMetrics()
        metrics.record(devices: [Self.device("cam-1", node: "node-1", frames: 40)])
        metrics.record(devices: [Self.device("cam-1", node: "node-2", frames: 5)])
        #expect(Self.sample(metrics, "capfleet_frames_captured_total", #"device="cam-1",node="node-1""#) == 40)
        #expect(Self.sample(metrics, "capfleet_frames_captured_total", #"device="cam-1",node="node-2""#) == 5)
    }

    @Test func nodeSeries_sayWhetherItIsUp_andItsClockOnceItReportsOne() {
        let metrics = FleetMetrics()
        var node = Capfleet_V1_NodeStatus.with {
            $0.nodeID = "node-1"
            $0.name = "host-1"
            $0.online = true
            $0.sendQueueDepth = 2
            $0.sendQueueCapacity = 8
        }
        metrics.record(nodes: [node])
        #expect(Self.sample(metrics, "capfleet_node_up", #"node="node-1",name="host-1""#) == 1)
        #expect(Self.sample(metrics, "capfleet_node_send_queue_depth", #"node="node-1""#) == 2)
        #expect(Self.sample(metrics, "capfleet_node_clock_locked", #"node="node-1""#) == 0)
        #expect(Self.sample(metrics, "capfleet_node_clock_drift_ppm", #"node="node-1""#) == nil)

        node.clock = .with {
            $0.sync = .locked
            $0.driftPpm = 12.5
            $0.uncertaintyNs = 2_000_000
        }
        metrics.record(nodes: [node])
        #expect(Self.sample(metrics, "capfleet_node_clock_locked", #"node="node-1""#) == 1)
        #expect(Self.sample(metrics, "capfleet_node_clock_drift_ppm", #"node="node-1""#) == 12.5)
        #expect(Self.sample(metrics, "capfleet_node_clock_uncertainty_seconds", #"node="node-1""#) == 0.002)

        node.online = false
        node.clearClock()
        metrics.record(nodes: [node])
        #expect(Self.sample(metrics, "capfleet_node_up", #"node="node-1",name="host-1""#) == 0)
        #expect(Self.sample(metrics, "capfleet_node_clock_locked", #"node="node-1""#) == 0)
    }
}
