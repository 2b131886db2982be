import FleetCore
import FleetProtocol
import Prometheus
import Synchronization

/// The fleet in Prometheus' terms. Counters follow the coordinator's cumulative counts
/// (frames, bytes, drops by reason), so `rate()` works and a scrape never sees one go down;
/// gauges hold the latest status. Updated once a second by the telemetry reporter,
/// read by the `/metrics` endpoint's thread.
public final class FleetMetrics: Sendable {
    public let registry = PrometheusCollectorRegistry()
    /// Last cumulative value pushed into each counter outside the device series (rejections),
    /// by counter name and labels.
    private let pushed = Mutex<[String: UInt64]>([:])
    /// Pressure gauges present per node, removed while the node is offline (a stale level
    /// would look current).
    private let pressureGauges = Mutex<[String: [(factor: String?, gauge: Gauge)]]>([:])
    /// Alignment gauges present per device, there only while it is online with alignment on
    /// (a stale phase would look current).
    private let alignmentGauges = Mutex<[String: [Gauge]]>([:])
    /// Every device's and node's series, made once: with hundreds of cameras reporting every
    /// second, finding a series in the registry by name and labels costs more than setting it.
    private let deviceSeries = Mutex<[DeviceSeries.Key: DeviceSeries]>([:])
    private let nodeSeries = Mutex<[NodeSeries.Key: NodeSeries]>([:])

    public init() {}

    // MetricNameDescriptor holds only `let` strings but is not marked Sendable upstream.
    static func descriptor(_ name: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "capfleet", metricName: name, unitName: unit, helpText: help)
    }

    nonisolated(unsafe) static let framesReceived = descriptor(
        "frames_received", "total",
        "Full-rate frames the coordinator accepted from the device (they flow only while someone wants them).")
    nonisolated(unsafe) static let framesCaptured = descriptor("frames_captured", "total", "Frames the device captured, as its agent counts them.")
    nonisolated(unsafe) static let bytesCaptured = descriptor("bytes_captured", "total", "Payload bytes of the frames the device captured.")
    nonisolated(unsafe) static let liveConsumers = descriptor(
        "device_live_consumers", "",
        "Who wants the device's full-rate frames now (viewers count as one; each waiting snapshot as one).")
    nonisolated(unsafe) static let bytesReceived = descriptor("bytes_received", "total", "Payload bytes the coordinator accepted from the device.")
    nonisolated(unsafe) static let framesDropped = descriptor(
        "frames_dropped", "total",
        "Frames lost, by reason: late (send queue full), out_of_buffers (no free capture buffer), discontinuity (sequence gap), encoder_late (a take's encoder fell behind)."
    )
    nonisolated(unsafe) static let framesPerSecond = descriptor(
        "device_frames_per_second", "", "Frames per second the device captured over the last second.")
    nonisolated(unsafe) static let streamFrames = descriptor(
        "stream_frames", "total",
        "A GenICam camera's frames as its stream counts them, by outcome: completed, incomplete (packets lost beyond resends: not delivered), underrun (no free buffer)."
    )
    nonisolated(unsafe) static let streamPackets = descriptor(
        "stream_packets", "total", "A GigE Vision camera's stream packets, by outcome: resent (asked for again), missing (never came).")
    nonisolated(unsafe) static let sensorSamples = descriptor(
        "sensor_samples", "total",
        "A sensor stream's samples, by outcome: received (accepted by its agent), refused (malformed, out of time or order), withheld (consent not granted), unsent (the control channel could not take them)."
    )
    nonisolated(unsafe) static let audioPeak = descriptor(
        "microphone_peak_dbfs", "", "A microphone channel's peak over the last second, dB below full scale (-120: silence).")
    nonisolated(unsafe) static let audioRMS = descriptor(
        "microphone_rms_dbfs", "", "A microphone channel's RMS level over the last second, dB below full scale (-120: silence).")
    nonisolated(unsafe) static let audioClipped = descriptor(
        "microphone_clipped_samples", "total", "A microphone channel's samples at full scale.")
    nonisolated(unsafe) static let audioClockRate = descriptor(
        "microphone_clock_rate_ppm", "",
        "A microphone's sample rate against its host's clock, parts per million from nominal (+ = fast); there once measured.")
    nonisolated(unsafe) static let deviceStreaming = descriptor("device_streaming", "", "1 while the device streams frames to the coordinator.")
    nonisolated(unsafe) static let deviceInterrupted = descriptor(
        "device_interrupted", "", "1 while the device is interrupted (unplugged, in use, pressure shutdown, driver error).")
    nonisolated(unsafe) static let deviceFrameRate = descriptor("device_active_frame_rate", "", "The device's active (maximum) frame rate.")
    nonisolated(unsafe) static let nodeUp = descriptor("node_up", "", "1 while the node's agent is connected and heartbeating.")
    nonisolated(unsafe) static let sendQueueDepth = descriptor("node_send_queue_depth", "", "Frames waiting in the agent's send queue.")
    nonisolated(unsafe) static let sendQueueCapacity = descriptor("node_send_queue_capacity", "", "Capacity of the agent's send queue.")
    nonisolated(unsafe) static let pressureLevel = descriptor(
        "node_pressure_level", "",
        "Pressure level: 0 nominal, 1 fair, 2 serious, 3 critical, 4 shutdown. Absent while the node is offline.")
    nonisolated(unsafe) static let pressureFactor = descriptor(
        "node_pressure_factor_level", "",
        "Level a contributing factor reached (same scale as capfleet_node_pressure_level).")
    nonisolated(unsafe) static let clockLocked = descriptor("node_clock_locked", "", "1 while the node's clock is locked to fleet time.")
    nonisolated(unsafe) static let clockUncertainty = descriptor(
        "node_clock_uncertainty_seconds", "",
        "Error bound of the fleet times the node stamps now.")
    nonisolated(unsafe) static let clockDrift = descriptor(
        "node_clock_drift_ppm", "", "The node clock's frequency error against fleet time (+ = fast).")
    nonisolated(unsafe) static let clockWallOffset = descriptor(
        "node_clock_wall_offset_seconds", "",
        "The node's system clock minus fleet time.")
    nonisolated(unsafe) static let alignmentPhase = descriptor(
        "device_alignment_phase_seconds", "",
        "The device's latest frame minus its nearest slot of the fleet-time grid.")
    nonisolated(unsafe) static let frameAligned = descriptor(
        "device_frame_aligned", "",
        "1 while the device's frames fall within 100 µs of their grid slots.")
    nonisolated(unsafe) static let alignmentSteered = descriptor(
        "device_alignment_steered", "",
        "1 while the device's frame length is steered onto the grid, 0 while it runs free.")
    nonisolated(unsafe) static let alignmentPhaseMedian = descriptor(
        "device_alignment_phase_median_seconds", "",
        "Median of |phase| over the device's frames of the last minute.")
    nonisolated(unsafe) static let alignmentPhaseP99 = descriptor(
        "device_alignment_phase_p99_seconds", "",
        "99th percentile of |phase| over the device's frames of the last minute.")
    nonisolated(unsafe) static let alignmentDrift = descriptor(
        "device_alignment_drift_seconds_per_second", "",
        "How fast the device's phase moves against the grid (a free-running camera's rate error).")
    nonisolated(unsafe) static let triggerLatenessMedian = descriptor(
        "device_trigger_lateness_median_seconds", "",
        "A triggered camera: median of how long after its slot each trigger left, over the last minute.")
    nonisolated(unsafe) static let triggerLatenessP99 = descriptor(
        "device_trigger_lateness_p99_seconds", "",
        "A triggered camera: 99th percentile of how long after its slot each trigger left.")
    nonisolated(unsafe) static let triggers = descriptor(
        "device_triggers", "",
        "A triggered camera's triggers since its grid was set, by outcome (fired, missed).")
    nonisolated(unsafe) static let events = descriptor("events", "total", "Fleet events published, by kind.")
    nonisolated(unsafe) static let rejected = descriptor("rejected_messages", "total", "Malformed or unknown input refused, by endpoint and reason.")
    nonisolated(unsafe) static let clockProbes = descriptor(
        "clock_probes_answered", "total",
        "Clock probe round trips the coordinator answered (each agent sends them in pairs).")
    nonisolated(unsafe) static let clockProbingAgents = descriptor(
        "clock_probing_agents", "",
        "Agents that probed the coordinator's clock in the 10 s before its last answer.")
    nonisolated(unsafe) static let clockProbePace = descriptor(
        "clock_probe_interval_seconds", "",
        "How often the coordinator asks each locked agent to probe: clock_probe_budget spread over the agents probing.")
    nonisolated(unsafe) static let offloadSentBytes = descriptor(
        "offload_sent_bytes", "total", "Bytes the fleet's hosts sent to a storage destination in copies they proved (recordings offload).")
    nonisolated(unsafe) static let offloadSegments = descriptor(
        "offload_segments", "total",
        "Segment copies to a storage destination, by outcome: verified (SHA-256 proved there), failed, held_back (consent not granted).")
    nonisolated(unsafe) static let offloadPendingBytes = descriptor(
        "offload_pending_bytes", "", "Bytes of the takes being offloaded to a destination that are not yet proved there.")
    nonisolated(unsafe) static let offloadRuns = descriptor("offload_runs", "", "Takes being offloaded to a destination now.")
    nonisolated(unsafe) static let alerts = descriptor(
        "alerts", "total", "Alerts raised, by alert and outcome (delivered, throttled, failed, published).")

    /// The Prometheus level scale: 0 nominal … 4 shutdown, nil when not reported.
    static func levelValue(_ level: Capfleet_V1_PressureLevel) -> Double? {
        switch level {
        case .nominal: 0
        case .fair: 1
        case .serious: 2
        case .critical: 3
        case .shutdown: 4
        default: nil
        }
    }

    /// Raises a counter to `value` (a cumulative count); a smaller value leaves it alone.
    private func advance(_ descriptor: MetricNameDescriptor, _ labels: [(String, String)], to reported: UInt64) {
        // The counter is an Int64 that wraps: a forged count must not send it negative.
        let value = Swift.min(reported, UInt64(Int64.max))
        let counter = registry.makeCounter(descriptor: descriptor, labels: labels)
        let key = descriptor.name + "|" + labels.map { "\($0.0)=\($0.1)" }.joined(separator: ",")
        let delta: UInt64 = pushed.withLock { table in
            let previous = table[key] ?? 0
            guard value > previous else { return 0 }
            table[key] = value
            return value - previous
        }
        if delta > 0 { counter.increment(by: Int64(clamping: delta)) }
    }

    func record(devices: [Capfleet_V1_DeviceStatus]) {
        deviceSeries.withLock { table in
            for status in devices {
                let key = DeviceSeries.Key(deviceID: status.deviceID, nodeID: status.nodeID)
                if table[key] == nil { table[key] = DeviceSeries(registry, key) }
                table[key]?.record(status, registry: registry)
            }
        }
        for status in devices { recordAlignment(status) }
    }

    func record(nodes: [Capfleet_V1_NodeStatus]) {
        nodeSeries.withLock { table in
            for node in nodes {
                let key = NodeSeries.Key(nodeID: node.nodeID, name: node.name)
                if table[key] == nil { table[key] = NodeSeries(registry, key) }
                table[key]?.record(node, registry: registry)
            }
        }
        for node in nodes { recordPressure(node) }
    }

    /// Alignment gauges while the device is online with alignment on (clock.md, "Frame alignment").
    private func recordAlignment(_ status: Capfleet_V1_DeviceStatus) {
        var gauges: [Gauge] = []
        if status.online, status.hasAlignment, ![.off, .unspecified].contains(status.alignment.state) {
            let labels = [("device", status.deviceID), ("node", status.nodeID)]
            let phase = registry.makeGauge(descriptor: Self.alignmentPhase, labels: labels)
            phase.set(Double(status.alignment.phaseNs) / 1e9)
            let aligned = registry.makeGauge(descriptor: Self.frameAligned, labels: labels)
            aligned.set(to: status.alignment.state == .aligned ? 1 : 0)
            let steered = registry.makeGauge(descriptor: Self.alignmentSteered, labels: labels)
            steered.set(to: status.alignment.steered ? 1 : 0)
            gauges = [phase, aligned, steered]
            // The figures over the last minute, once there are frames to give them.
            if status.alignment.phaseFrames > 0 {
                let median = registry.makeGauge(descriptor: Self.alignmentPhaseMedian, labels: labels)
                median.set(Double(status.alignment.phaseMedianNs) / 1e9)
                let p99 = registry.makeGauge(descriptor: Self.alignmentPhaseP99, labels: labels)
                p99.set(Double(status.alignment.phaseP99Ns) / 1e9)
                let drift = registry.makeGauge(descriptor: Self.alignmentDrift, labels: labels)
                drift.set(status.alignment.driftNsPerS / 1e9)
                gauges += [median, p99, drift]
            }
            if status.alignment.triggered {
                let median = registry.makeGauge(descriptor: Self.triggerLatenessMedian, labels: labels)
                median.set(Double(status.alignment.triggerLatenessMedianNs) / 1e9)
                let p99 = registry.makeGauge(descriptor: Self.triggerLatenessP99, labels: labels)
                p99.set(Double(status.alignment.triggerLatenessP99Ns) / 1e9)
                let fired = registry.makeGauge(descriptor: Self.triggers, labels: labels + [("outcome", "fired")])
                fired.set(Double(status.alignment.triggersFired))
                let missed = registry.makeGauge(descriptor: Self.triggers, labels: labels + [("outcome", "missed")])
                missed.set(Double(status.alignment.triggersMissed))
                gauges += [median, p99, fired, missed]
            }
        }
        let stale = alignmentGauges.withLock { table in
            let previous = table[status.deviceID] ?? []
            table[status.deviceID] = gauges.isEmpty ? nil : gauges
            return previous.filter { old in !gauges.contains { $0 === old } }
        }
        for gauge in stale { registry.unregisterGauge(gauge) }
    }

    private func recordPressure(_ node: Capfleet_V1_NodeStatus) {
        var wanted: [(factor: String?, value: Double)] = []
        if node.online, let level = Self.levelValue(node.pressureLevel) {
            wanted.append((nil, level))
            var reported: [String: Double] = [:]
            for factor in node.pressureFactors { reported[factor.factor] = Self.levelValue(factor.level) }
            // A factor back at nominal reads 0 rather than vanishing, so graphs fall to zero.
            let known = pressureGauges.withLock { ($0[node.nodeID] ?? []).compactMap(\.factor) }
            for factor in Set(known).union(reported.keys).sorted() {
                wanted.append((factor, reported[factor] ?? 0))
            }
        }
        let gauges = wanted.map { entry in
            let gauge =
                entry.factor.map { registry.makeGauge(descriptor: Self.pressureFactor, labels: [("node", node.nodeID), ("factor", $0)]) }
                ?? registry.makeGauge(descriptor: Self.pressureLevel, labels: [("node", node.nodeID)])
            gauge.set(entry.value)
            return (entry.factor, gauge)
        }
        let stale = pressureGauges.withLock { table in
            let previous = table[node.nodeID] ?? []
            table[node.nodeID] = gauges
            return previous.filter { old in !gauges.contains { $0.1 === old.gauge } }
        }
        for entry in stale { registry.unregisterGauge(entry.gauge) }
    }

    func countEvent(_ kind: Capfleet_V1_EventKind) {
        registry.makeCounter(descriptor: Self.events, labels: [("kind", kind.topicSuffix)]).increment()
    }

    func countAlert(_ alert: String, outcome: String) {
        registry.makeCounter(descriptor: Self.alerts, labels: [("alert", alert), ("outcome", outcome)]).increment()
    }

    func record(rejections: [(endpoint: String, reason: String, count: UInt64)]) {
        for entry in rejections {
            advance(Self.rejected, [("endpoint", entry.endpoint), ("reason", entry.reason)], to: entry.count)
        }
    }

    /// One segment copy's outcome on `destination` (`verified`, `failed` or `held_back`).
    func countOffload(to destination: String, outcome: String, sentBytes: UInt64) {
        let labels = [("destination", destination)]
        registry.makeCounter(descriptor: Self.offloadSegments, labels: labels + [("outcome", outcome)]).increment()
        if sentBytes > 0 {
            registry.makeCounter(descriptor: Self.offloadSentBytes, labels: labels).increment(by: Int64(clamping: sentBytes))
        }
    }

    /// The offloads under way to `destination`: how many, and the bytes they have still to prove.
    func recordOffloads(to destination: String, runs: Int, pendingBytes: UInt64) {
        let labels = [("destination", destination)]
        registry.makeGauge(descriptor: Self.offloadRuns, labels: labels).set(Double(runs))
        registry.makeGauge(descriptor: Self.offloadPendingBytes, labels: labels).set(Double(pendingBytes))
    }

    func record(clockProbes: ClockEndpoint.Statistics) {
        advance(Self.clockProbes, [], to: clockProbes.answered.load(ordering: .relaxed))
        registry.makeGauge(descriptor: Self.clockProbingAgents, labels: []).set(Double(clockProbes.agents.load(ordering: .relaxed)))
        registry.makeGauge(descriptor: Self.clockProbePace, labels: []).set(Double(clockProbes.paceMilliseconds.load(ordering: .relaxed)) / 1000)
    }

    /// The text exposition format (version 0.0.4).
    public func exposition() -> [UInt8] { registry.emitToBuffer() }
}
