import FleetProtocol
import Prometheus

/// One device's series under one pair of device and node labels, made once, with the
/// cumulative counts last pushed into its counters: a counter only ever goes up, by the
/// difference, so `rate()` works and a scrape never sees one go down.
struct DeviceSeries: Sendable {
    struct Key: Hashable, Sendable {
        let deviceID: String
        let nodeID: String
    }

    /// Frames and bytes received, frames and bytes captured, drops late, out of buffers and
    /// by discontinuity, in the order of `counts(_:)`.
    private let counters: [Counter]
    private var pushed: [UInt64]
    private let liveConsumers, framesPerSecond, streaming, interrupted: Gauge
    /// Made once the device reports a frame rate.
    private var frameRate: Gauge?
    /// A sensor stream's samples by outcome, made once it reports itself a sensor stream.
    private var samples: OutcomeSeries?
    /// A GenICam camera's stream transport: frames and packets by outcome, made once reported.
    private var transportFrames: OutcomeSeries?
    private var transportPackets: OutcomeSeries?
    /// A microphone's meters and clock, made once it reports levels.
    private var sound: SoundSeries?
    private let labels: [(String, String)]

    /// Makes every counter at once, so that each is there from the first scrape, at zero.
    init(_ registry: PrometheusCollectorRegistry, _ key: Key) {
        let labels = [("device", key.deviceID), ("node", key.nodeID)]
        self.labels = labels
        counters =
            [FleetMetrics.framesReceived, FleetMetrics.bytesReceived, FleetMetrics.framesCaptured, FleetMetrics.bytesCaptured]
            .map { registry.makeCounter(descriptor: $0, labels: labels) }
            + ["late", "out_of_buffers", "discontinuity", "encoder_late"]
            .map { registry.makeCounter(descriptor: FleetMetrics.framesDropped, labels: labels + [("reason", $0)]) }
        pushed = Array(repeating: 0, count: counters.count)
        liveConsumers = registry.makeGauge(descriptor: FleetMetrics.liveConsumers, labels: labels)
        framesPerSecond = registry.makeGauge(descriptor: FleetMetrics.framesPerSecond, labels: labels)
        streaming = registry.makeGauge(descriptor: FleetMetrics.deviceStreaming, labels: labels)
        interrupted = registry.makeGauge(descriptor: FleetMetrics.deviceInterrupted, labels: labels)
    }

    private static func counts(_ status: Capfleet_V1_DeviceStatus) -> [UInt64] {
        [
            status.framesReceived, status.bytesReceived, status.framesCaptured, status.bytesCaptured,
            status.drops.late, status.drops.outOfBuffers, status.drops.discontinuity, status.drops.encoderLate,
        ]
    }

    mutating func record(_ status: Capfleet_V1_DeviceStatus, registry: PrometheusCollectorRegistry) {
        for (index, reported) in Self.counts(status).enumerated() {
            // The counter is an Int64 that wraps: a forged count must not send it negative.
            let value = min(reported, UInt64(Int64.max))
            guard value > pushed[index] else { continue }
            counters[index].increment(by: Int64(value - pushed[index]))
            pushed[index] = value
        }
        liveConsumers.set(Double(status.liveConsumers))
        framesPerSecond.set(status.framesPerSecond)
        streaming.set(to: status.streaming ? 1 : 0)
        interrupted.set(to: status.interruption.reason == .none ? 0 : 1)
        if status.activeFrameRate > 0 {
            let gauge = frameRate ?? registry.makeGauge(descriptor: FleetMetrics.deviceFrameRate, labels: labels)
            frameRate = gauge
            gauge.set(status.activeFrameRate)
        }
        if status.kind == .sensor, status.online {
            var series =
                samples
                ?? OutcomeSeries(registry, FleetMetrics.sensorSamples, labels: labels, outcomes: ["received", "refused", "withheld", "unsent"])
            series.record([status.samplesReceived, status.samplesRefused, status.samplesWithheld, status.samplesUnsent])
            samples = series
        }
        if status.hasStreamTransport, status.online {
            let transport = status.streamTransport
            var frames =
                transportFrames
                ?? OutcomeSeries(registry, FleetMetrics.streamFrames, labels: labels, outcomes: ["completed", "incomplete", "underrun"])
            frames.record([transport.framesCompleted, transport.framesIncomplete, transport.underruns])
            transportFrames = frames
            var packets = transportPackets ?? OutcomeSeries(registry, FleetMetrics.streamPackets, labels: labels, outcomes: ["resent", "missing"])
            packets.record([transport.packetsResent, transport.packetsMissing])
            transportPackets = packets
        }
        if status.kind == .syntheticMicrophone || status.kind == .alsa, status.online, !status.audioLevels.isEmpty {
            var series = sound ?? SoundSeries(registry, labels: labels, channels: status.audioLevels.count)
            series.record(status, registry: registry)
            sound = series
        }
    }
}

/// A microphone's meters per channel (microphones.md, "Levels") and its clock's rate
/// ("The audio clock"): gauges of the latest second, and clipped samples as a counter that
/// starts over with its agent's process.
struct SoundSeries: Sendable {
    private let peak, rms: [Gauge]
    private let clipped: [Counter]
    private var pushed: [UInt64]
    private var ratePPM: Gauge?
    private let labels: [(String, String)]

    init(_ registry: PrometheusCollectorRegistry, labels: [(String, String)], channels: Int) {
        self.labels = labels
        let channelLabels = (0..<channels).map { labels + [("channel", String($0))] }
        peak = channelLabels.map { registry.makeGauge(descriptor: FleetMetrics.audioPeak, labels: $0) }
        rms = channelLabels.map { registry.makeGauge(descriptor: FleetMetrics.audioRMS, labels: $0) }
        clipped = channelLabels.map { registry.makeCounter(descriptor: FleetMetrics.audioClipped, labels: $0) }
        pushed = Array(repeating: 0, count: channels)
    }

    mutating func record(_ status: Capfleet_V1_DeviceStatus, registry: PrometheusCollectorRegistry) {
        for (channel, level) in status.audioLevels.enumerated() where channel < peak.count {
            peak[channel].set(level.peakDbfs)
            rms[channel].set(level.rmsDbfs)
            let value = min(level.clipped, UInt64(Int64.max))
            let added = value >= pushed[channel] ? value - pushed[channel] : value
            if added > 0 { clipped[channel].increment(by: Int64(added)) }
            pushed[channel] = value
        }
        guard status.hasAudioClock, status.audioClock.rateMeasured else { return }
        let gauge = ratePPM ?? registry.makeGauge(descriptor: FleetMetrics.audioClockRate, labels: labels)
        ratePPM = gauge
        gauge.set(status.audioClock.ratePpm)
    }
}

/// Counters of one thing by outcome: a sensor stream's samples (sensors.md, "Counters"), a
/// GenICam camera's frames and packets (device-model.md, "GenICam cameras"). Their agent
/// counts from 0 at each start: a count below the one pushed is a new process, whose whole
/// count is new.
struct OutcomeSeries: Sendable {
    private let counters: [Counter]
    private var pushed: [UInt64]

    init(_ registry: PrometheusCollectorRegistry, _ descriptor: MetricNameDescriptor, labels: [(String, String)], outcomes: [String]) {
        counters = outcomes.map { registry.makeCounter(descriptor: descriptor, labels: labels + [("outcome", $0)]) }
        pushed = Array(repeating: 0, count: counters.count)
    }

    /// The counts as reported, in the order of the outcomes.
    mutating func record(_ counts: [UInt64]) {
        for (index, reported) in counts.enumerated() where index < counters.count {
            let value = min(reported, UInt64(Int64.max))
            let added = value >= pushed[index] ? value - pushed[index] : value
            if added > 0 { counters[index].increment(by: Int64(added)) }
            pushed[index] = value
        }
    }
}

/// One node's series (liveness, send queue, clock), made once per node id and name; its
/// pressure gauges come and go with its reports and are kept apart.
struct NodeSeries: Sendable {
    struct Key: Hashable, Sendable {
        let nodeID: String
        let name: String
    }

    private let up, sendQueueDepth, sendQueueCapacity, clockLocked: Gauge
    /// Made once the node reports its clock.
    private var clock: (uncertainty: Gauge, drift: Gauge, wallOffset: Gauge)?
    private let labels: [(String, String)]

    init(_ registry: PrometheusCollectorRegistry, _ key: Key) {
        let labels = [("node", key.nodeID)]
        self.labels = labels
        up = registry.makeGauge(descriptor: FleetMetrics.nodeUp, labels: labels + [("name", key.name)])
        sendQueueDepth = registry.makeGauge(descriptor: FleetMetrics.sendQueueDepth, labels: labels)
        sendQueueCapacity = registry.makeGauge(descriptor: FleetMetrics.sendQueueCapacity, labels: labels)
        clockLocked = registry.makeGauge(descriptor: FleetMetrics.clockLocked, labels: labels)
    }

    /// Clock gauges while the node reports its clock; 0 for "locked" otherwise.
    mutating func record(_ node: Capfleet_V1_NodeStatus, registry: PrometheusCollectorRegistry) {
        up.set(to: node.online ? 1 : 0)
        sendQueueDepth.set(Double(node.sendQueueDepth))
        sendQueueCapacity.set(Double(node.sendQueueCapacity))
        let reported = node.hasClock && node.clock.sync != .unspecified
        clockLocked.set(to: reported && node.clock.sync == .locked ? 1 : 0)
        guard reported else { return }
        let gauges =
            clock ?? (
                registry.makeGauge(descriptor: FleetMetrics.clockUncertainty, labels: labels),
                registry.makeGauge(descriptor: FleetMetrics.clockDrift, labels: labels),
                registry.makeGauge(descriptor: FleetMetrics.clockWallOffset, labels: labels)
            )
        clock = gauges
        gauges.uncertainty.set(Double(node.clock.uncertaintyNs) / 1e9)
        gauges.drift.set(node.clock.driftPpm)
        gauges.wallOffset.set(Double(node.clock.wallClockOffsetNs) / 1e9)
    }
}
