import FleetBus
import FleetCore
import FleetProtocol
import FleetStore
import Foundation
import Logging
import SwiftProtobuf

/// Once a second: measures every device's throughput, publishes node and device status
/// (and drops when they changed) on the telemetry topics, and every few seconds stores
/// the counters so a coordinator restart keeps them.
actor TelemetryReporter {
    private let store: FleetDatabase
    private let ingest: FrameIngest
    private let control: ControlHandler
    private let liveFlow: LiveFlowKeeper
    private let telemetry: TelemetryPublisherSocket
    private let metrics: FleetMetrics
    private let rejections: RejectionCounter
    private let clockProbes: ClockEndpoint.Statistics
    private let alerts: AlertCenter
    private let clock: CoordinatorClock
    private let logger: Logger
    private var meters: [String: ThroughputMeter] = [:]
    private var publishedDrops: [String: DropTally] = [:]
    private var storedCounters: [String: (UInt64, DropTally)] = [:]
    private var storedCaptures: [String: AgentRunCaptures] = [:]
    /// The rejection counts as last stored.
    private var storedRejections: [RejectionLedger.Key: UInt64] = [:]
    private(set) var deviceStatuses: [Capfleet_V1_DeviceStatus] = []
    private(set) var nodeStatuses: [Capfleet_V1_NodeStatus] = []
    private(set) var pressureReports: [Capfleet_V1_PressureReport] = []
    private var ticks = 0

    init(
        store: FleetDatabase, ingest: FrameIngest, control: ControlHandler, liveFlow: LiveFlowKeeper, telemetry: TelemetryPublisherSocket,
        metrics: FleetMetrics, rejections: RejectionCounter, clockProbes: ClockEndpoint.Statistics, alerts: AlertCenter, clock: CoordinatorClock,
        logger: Logger
    ) {
        self.alerts = alerts
        self.clock = clock
        self.metrics = metrics
        self.rejections = rejections
        self.clockProbes = clockProbes
        self.store = store
        self.ingest = ingest
        self.control = control
        self.liveFlow = liveFlow
        self.telemetry = telemetry
        self.logger = logger
    }

    func tick() async {
        ticks += 1
        let now = MonotonicTime.now()
        let snapshot = ingest.snapshot()
        let previews = ingest.previews.rates(atMonotonic: now)
        do {
            let nodes = try await store.nodes()
            let devices = try await store.devices()
            let consents = try await store.consents()
            var statuses: [Capfleet_V1_DeviceStatus] = []
            // One look at the live sessions a tick, whatever the fleet's size.
            let live = await control.liveStatus(of: Set(nodes.map(\.id)))
            let consumers = await liveFlow.consumers(of: devices.map(\.id))
            var online: [String: Bool] = [:]
            for node in nodes { online[node.id] = live[node.id] != nil }
            var countersByDevice: [String: Capfleet_V1_DeviceCounters] = [:]
            for status in live.values { for counters in status.devices { countersByDevice[counters.deviceID] = counters } }
            var presentDevices: [String: Int] = [:]
            for device in devices where device.present { presentDevices[device.nodeId, default: 0] += 1 }
            for device in devices {
                let state = snapshot[device.id]
                let counters = (online[device.nodeId] ?? false) ? countersByDevice[device.id] : nil
                // The camera's rate as its agent counts it: frames cross the network only on demand.
                // An agent before protocol 1.3 reports no captured counts but sends every frame.
                let counted = state?.captures.total ?? CaptureTally()
                let captured = CaptureTally(
                    frames: max(counted.frames, state?.framesReceived ?? 0),
                    bytes: max(counted.bytes, state?.bytesReceived ?? 0))
                var meter = meters[device.id] ?? ThroughputMeter()
                meter.sample(frames: captured.frames, bytes: captured.bytes, at: now)
                meters[device.id] = meter
                let status = Capfleet_V1_DeviceStatus.with {
                    $0.deviceID = device.id
                    $0.nodeID = device.nodeId
                    $0.online = (online[device.nodeId] ?? false) && device.present
                    $0.streaming = $0.online && (state?.streaming ?? false)
                    $0.framesReceived = state?.framesReceived ?? UInt64(device.framesReceived)
                    $0.bytesReceived = state?.bytesReceived ?? UInt64(device.bytesReceived)
                    $0.framesCaptured = captured.frames
                    $0.bytesCaptured = captured.bytes
                    $0.liveConsumers = UInt32(consumers[device.id]?.count ?? 0)
                    $0.liveFlow = $0.online && (state?.liveFlow ?? false)
                    $0.framesPerSecond = $0.online ? meter.framesPerSecond : 0
                    $0.bytesPerSecond = $0.online ? meter.bytesPerSecond : 0
                    $0.drops = (state?.drops ?? device.drops).wire
                    $0.lastFrameUnixMs = state.map { $0.lastFrameUnixMilliseconds } ?? (device.lastFrameAt ?? 0)
                    $0.lastSequence = state?.lastSequence ?? 0
                    $0.pixelFormat = state?.layout.pixelFormat ?? ""
                    $0.width = state?.layout.width ?? 0
                    $0.height = state?.layout.height ?? 0
                    $0.consent = (consents[device.id]?.consentState ?? .notDetermined).wire
                    $0.kind = (SourceKind(rawValue: device.kind) ?? .v4l2).wire
                    if let preview = previews[device.id] {
                        $0.previewsReceived = preview.received
                        $0.previewsPerSecond = $0.online ? preview.perSecond : 0
                        $0.lastPreviewUnixMs = preview.lastUnixMilliseconds
                    }
                    if let counters {
                        $0.recording = counters.recording
                        $0.realFrames = counters.realFrames
                        $0.interruption = counters.interruption
                        $0.zoomFactor = counters.zoomFactor
                        if counters.hasFocus { $0.focus = counters.focus }
                        $0.activeFrameRate = counters.activeFrameRate
                        $0.liveFramesSent = counters.framesSent
                        $0.detectionExamined = counters.detectionExamined
                        $0.detectionSkipped = counters.detectionSkipped
                        $0.samplesReceived = counters.samplesReceived
                        $0.samplesRefused = counters.samplesRefused
                        $0.samplesWithheld = counters.samplesWithheld
                        $0.samplesUnsent = counters.samplesUnsent
                        $0.audioLevels = counters.audioLevels
                        $0.audioFramesCaptured = counters.audioFramesCaptured
                        if counters.hasAudioClock { $0.audioClock = counters.audioClock }
                        if counters.hasStreamTransport { $0.streamTransport = counters.streamTransport }
                        if counters.hasRegion { $0.region = counters.region }
                        if counters.hasPreRoll { $0.preRoll = counters.preRoll }
                        if counters.hasAlignment { $0.alignment = counters.alignment }
                        // An interrupted device is not streaming, whatever its last frames say.
                        if counters.interruption.reason != .none { $0.streaming = false }
                    }
                }
                statuses.append(status)
                if status.online {
                    alerts.deviceCounters(
                        device.id, nodeID: device.nodeId, frames: status.framesCaptured,
                        drops: DropTally(wire: status.drops).total, at: now)
                }
                publish(TelemetryTopic.device(device.id), status)
                let drops = DropTally(wire: status.drops)
                if publishedDrops[device.id] != drops {
                    publishedDrops[device.id] = drops
                    publish(
                        TelemetryTopic.drops(device.id),
                        Capfleet_V1_DropsReport.with {
                            $0.deviceID = device.id
                            $0.nodeID = device.nodeId
                            $0.drops = status.drops
                        })
                }
            }
            deviceStatuses = statuses
            var nodeStatuses: [Capfleet_V1_NodeStatus] = []
            var reports: [Capfleet_V1_PressureReport] = []
            var clocks: [NodeClockRecord] = []
            let nowUnix = clock.unixMilliseconds()
            for node in nodes {
                let lastStatus = live[node.id]
                let pressure = lastStatus.flatMap { $0.hasPressure ? $0.pressure : nil }
                if let pressure {
                    reports.append(pressure)
                    publish(TelemetryTopic.pressure(node.id), pressure)
                }
                let status = Capfleet_V1_NodeStatus.with {
                    $0.nodeID = node.id
                    $0.name = node.name
                    $0.hostname = node.hostname
                    $0.online = online[node.id] ?? false
                    $0.lastSeenUnixMs = node.lastSeenAt
                    $0.deviceCount = UInt32(presentDevices[node.id] ?? 0)
                    $0.sendQueueDepth = lastStatus?.sendQueueDepth ?? 0
                    $0.sendQueueCapacity = lastStatus?.sendQueueCapacity ?? 0
                    $0.sensorMessagesRefused = lastStatus?.sensorMessagesRefused ?? 0
                    if let pressure {
                        $0.pressureLevel = pressure.level
                        $0.pressureFactors = pressure.factors
                    }
                    if let report = lastStatus, report.hasClock,
                        let clock = NodeClockRecord(wire: report.clock, nodeID: node.id, at: nowUnix)
                    {
                        $0.clock = clock.wire
                        clocks.append(clock)
                    }
                }
                nodeStatuses.append(status)
                publish(TelemetryTopic.node(node.id), status)
            }
            self.nodeStatuses = nodeStatuses
            metrics.record(devices: statuses)
            metrics.record(nodes: nodeStatuses)
            metrics.record(rejections: rejections.counts)
            metrics.record(clockProbes: clockProbes)
            pressureReports = reports
            if ticks % 2 == 0 { try await flushCounters(snapshot) }
            let onlineIDs = online.filter(\.value).map(\.key)
            if ticks % 5 == 0 {
                try await store.touchNodes(onlineIDs, at: nowUnix)
                try await store.saveClocks(clocks)
            }
        } catch  where !Task.isCancelled {
            logger.error("telemetry tick failed", metadata: ["error": "\(error)"])
        } catch {
            // Shutting down: the final flush happens in the service.
        }
    }

    /// Writes counters that changed since the last flush.
    func flushCounters(_ snapshot: [String: DeviceIngestState]? = nil) async throws(StoreError) {
        let snapshot = snapshot ?? ingest.snapshot()
        var updates: [DeviceCountersUpdate] = []
        for (id, state) in snapshot where storedCounters[id].map({ $0.0 != state.framesReceived || $0.1 != state.drops }) ?? true {
            updates.append(
                DeviceCountersUpdate(
                    deviceID: id, framesReceived: state.framesReceived, bytesReceived: state.bytesReceived,
                    drops: state.drops,
                    lastFrameAt: state.lastFrameUnixMilliseconds > 0 ? state.lastFrameUnixMilliseconds : nil))
            storedCounters[id] = (state.framesReceived, state.drops)
        }
        try await store.updateDeviceCounters(updates)
        let captures = snapshot.compactMapValues { state in state.captures }.filter { storedCaptures[$0.key] != $0.value }
        try await store.saveCaptureCounts(captures)
        storedCaptures.merge(captures) { _, new in new }
        let rejected = rejections.counts.filter { storedRejections[RejectionLedger.Key(endpoint: $0.endpoint, reason: $0.reason)] != $0.count }
        try await store.saveRejectionTotals(rejected.map { RejectionTotal(endpoint: $0.endpoint, reason: $0.reason, count: $0.count) })
        for entry in rejected { storedRejections[RejectionLedger.Key(endpoint: entry.endpoint, reason: entry.reason)] = entry.count }
    }

    private func publish(_ topic: String, _ message: some SwiftProtobuf.Message) {
        do {
            telemetry.publish(topic: topic, payload: try message.serializedBytes())
        } catch {
            logger.error("a telemetry message could not be encoded", metadata: ["topic": "\(topic)", "error": "\(error)"])
        }
    }
}
