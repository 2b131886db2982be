import FleetBus
import FleetCapture
import FleetCore
import FleetProtocol
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// One agent: discovers its cameras, registers with the coordinator, streams frames and
/// reports status until it is told to shut down.
public final class AgentService: Service, Sendable {
    public static let softwareVersion = "0.1.0"

    private let configuration: AgentConfiguration
    private let identity: NodeIdentity
    private let sources: [CameraStream]
    private let logger: Logger

    public init(configuration: AgentConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.identity = try NodeIdentity.loadOrCreate(stateDirectory: configuration.stateDirectory)
        var logger = logger
        logger[metadataKey: "node.id"] = "\(identity.nodeID)"
        self.logger = logger
        let shortID = identity.nodeID.replacingOccurrences(of: "node-", with: "").prefix(8)
        sources = (0..<configuration.syntheticCameraCount).map { index in
            CameraStream(source: SyntheticCamera(
                deviceID: "syn-\(shortID)-\(index + 1)", name: "Synthetic camera \(index + 1)",
                initialFormat: configuration.syntheticFormat, frameRate: configuration.syntheticFrameRate))
        }
        guard !sources.isEmpty else { throw AgentError.noCameras }
    }

    public var nodeID: String { identity.nodeID }

    public func run() async throws {
        let context = ZMQContext()
        let publisher = try FramePublisher(context: context, capacity: configuration.sendQueueCapacity, logger: logger)
        let handlers = ControlHandlers(
            hello: { [self] in hello() },
            status: { [self] in status(publisher: publisher) },
            command: { [self] command in execute(command) },
            registered: { [self] port in
                publisher.connect(to: configuration.ingestEndpoint(port: port))
                startStreaming(publisher: publisher)
            })
        let control = try ControlChannel(context: context, endpoint: configuration.controlEndpoint, nodeID: identity.nodeID,
                                         handlers: handlers, logger: logger)
        logger.info("agent started", metadata: ["coordinator": "\(configuration.controlEndpoint)", "devices": "\(sources.count)"])

        try? await gracefulShutdown()

        logger.info("agent stopping")
        for stream in sources { stream.stop() }
        control.stop()
        publisher.stop()
    }

    /// gethostname(2), not Foundation's hostName, which may wait on a DNS lookup.
    private var hostname: String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "unknown-host" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private func hello() -> Capfleet_V1_Hello {
        .with {
            $0.protocolVersion = WireDefaults.protocolMajor
            $0.protocolMinor = WireDefaults.protocolMinor
            $0.nodeID = identity.nodeID
            $0.nodeName = configuration.nodeName ?? hostname
            $0.hostname = hostname
            $0.softwareVersion = Self.softwareVersion
            $0.bootMonotonicNs = MonotonicTime.now()
            $0.devices = sources.map { stream in
                let source = stream.source
                return .with {
                    $0.deviceID = source.device.deviceID
                    $0.name = source.device.name
                    $0.driver = source.device.driver
                    $0.kind = source.device.kind.wire
                    $0.formats = source.device.formats.map(\.wire)
                    $0.activeFormatIndex = UInt32(source.activeFormatIndex)
                    $0.activeFrameRate = source.activeFrameRate
                }
            }
        }
    }

    private func status(publisher: FramePublisher) -> Capfleet_V1_AgentStatus {
        .with {
            $0.nodeID = identity.nodeID
            $0.devices = sources.map(\.statistics.wire)
            $0.sendQueueDepth = UInt32(publisher.queueDepth)
            $0.sendQueueCapacity = UInt32(publisher.queueCapacity)
        }
    }

    private func startStreaming(publisher: FramePublisher) {
        for stream in sources where !stream.statistics.streaming.load(ordering: .acquiring) {
            do {
                try stream.start(nodeID: identity.nodeID, publisher: publisher)
                logger.info("streaming", metadata: ["device.id": "\(stream.source.device.deviceID)"])
            } catch {
                logger.error("cannot start the device", metadata: ["device.id": "\(stream.source.device.deviceID)", "error": "\(error)"])
            }
        }
    }

    private func execute(_ command: Capfleet_V1_Command) -> Capfleet_V1_CommandReply {
        guard let stream = sources.first(where: { $0.source.device.deviceID == command.deviceID }) else {
            return .with {
                $0.commandID = command.commandID
                $0.status = .failure(.notFound, "device \(command.deviceID) is not on node \(identity.nodeID)")
            }
        }
        var reply = Capfleet_V1_CommandReply()
        reply.commandID = command.commandID
        reply.status = apply(command, to: stream)
        reply.activeFormatIndex = UInt32(stream.source.activeFormatIndex)
        reply.activeFrameRate = stream.source.activeFrameRate
        reply.zoomFactor = stream.source.zoomFactor
        reply.zoomMethod = stream.source.zoomMethod?.wire ?? .unspecified
        return reply
    }

    private func apply(_ command: Capfleet_V1_Command, to stream: CameraStream) -> Capfleet_V1_Status {
        do {
            switch command.action {
            case let .setActiveFormat(request)?:
                try stream.source.setActiveFormat(index: Int(request.formatIndex))
            case let .setFrameRate(request)?:
                try stream.source.setFrameRate(request.framesPerSecond)
            case let .setZoom(request)?:
                guard stream.source.zoomMethod != nil else {
                    return .failure(.unsupported, "device \(command.deviceID) cannot zoom")
                }
                try stream.source.zoom(request.cancel ? .cancel
                    : request.rampRate > 0 ? .ramp(to: request.factor, rate: request.rampRate) : .set(request.factor))
            case nil:
                return .failure(.badRequest, "command \(command.commandID) carries no action")
            }
            logger.info("command applied", metadata: ["device.id": "\(command.deviceID)", "command.id": "\(command.commandID)"])
            return .ok
        } catch {
            return .failure(.unsupported, error.description)
        }
    }
}

/// A source together with its counters and the per-frame bookkeeping done on its thread.
final class CameraStream: Sendable {
    let source: any CameraSource
    let statistics: DeviceStatistics
    private let gaps = Mutex(SequenceGapDetector())

    init(source: any CameraSource) {
        self.source = source
        self.statistics = DeviceStatistics(deviceID: source.device.deviceID, outOfBuffers: { [source] in source.outOfBufferDrops })
    }

    func start(nodeID: String, publisher: FramePublisher) throws(CaptureError) {
        let synthetic = source.device.kind == .synthetic
        try source.start { [self] frame in
            statistics.framesCaptured.add(1, ordering: .relaxed)
            let skipped = gaps.withLock { $0.observe(frame.sequence) }
            if skipped > 0 { statistics.discontinuity.add(skipped, ordering: .relaxed) }
            var flags = synthetic ? UInt32(Capfleet_V1_FrameFlag.synthetic.rawValue) : 0
            if let threshold = source.device.formats[source.activeFormatIndex].upscaleThresholdZoomFactor, frame.zoomFactor > threshold + 1e-9 {
                flags |= UInt32(Capfleet_V1_FrameFlag.upscaled.rawValue)
            }
            var header = Capfleet_V1_FrameHeader(capturing: frame, nodeID: nodeID, deviceID: source.device.deviceID,
                                                 flags: flags, drops: statistics.drops)
            header.zoomMethod = source.zoomMethod?.wire ?? .unspecified
            publisher.submit(frame, header: header, statistics: statistics)
        }
        statistics.streaming.store(true, ordering: .releasing)
    }

    func stop() {
        source.stop()
        statistics.streaming.store(false, ordering: .releasing)
    }
}
