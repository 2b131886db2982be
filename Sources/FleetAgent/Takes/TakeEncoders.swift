import FleetCapture
import FleetCore
import FleetEncoding
import FleetProtocol
import Logging
import Synchronization

/// The encoders of this host's takes in progress, one per (take, device): made when an
/// encoded part begins, kept when the coordinator says the same take again (a reconnection
/// must not restart an encoder mid-GOP), and dropped once their part has ended.
final class TakeEncoders: Sendable {
    let catalog: EncoderCatalog
    private let settings: TakeEncodingPath.Settings
    private let logger: Logger
    private let paths = Mutex<[TakeDeviceKey: TakeEncodingPath]>([:])
    private let closing = Mutex<[Task<Void, Never>]>([])

    init(catalog: EncoderCatalog, settings: TakeEncodingPath.Settings, logger: Logger) {
        self.catalog = catalog
        self.settings = settings
        self.logger = logger
    }

    /// Finds this host's encoders (hardware ones tried with a frame): blocking, at start.
    static func discover(useHardware: Bool, logger: Logger) -> EncoderCatalog {
        let memoryToMemory = V4L2Discovery.memoryToMemoryEncoders().map { node in
            EncoderCatalog.MemoryToMemoryNode(path: node.path, codecs: node.codecs.compactMap(VideoCodec.init(rawValue:)))
        }
        let catalog = EncoderCatalog.discover(memoryToMemory: memoryToMemory, renderNodes: EncoderCatalog.renderNodes(), useHardware: useHardware)
        for finding in catalog.findings { logger.info("encoders", metadata: ["found": "\(finding)"]) }
        return catalog
    }

    /// The path for the part: its encoder in front of `downstream`, the same one when the
    /// part is said again.
    func path(
        for key: TakeDeviceKey, encoding: TakeEncoding, takeStart: UInt64, segmentSeconds: Int, frameRate: Double,
        downstream: any TakeFramePath, stream: CameraStream
    ) -> TakeEncodingPath {
        paths.withLock { paths in
            if let existing = paths[key], existing.encoding == encoding { return existing }
            // Half a second of frames may wait for the encoder; past that they are late.
            let capacity = max(4, Int((frameRate / 2).rounded(.up)))
            // A take on the coordinator serves the encoded stream's viewers from its recording path.
            var onPacket: (@Sendable (Capfleet_V1_FrameHeader, FrameBuffer, Int) -> Void)?
            if !downstream.reachesCoordinator {
                onPacket = { [weak stream] header, payload, count in stream?.offerEncodedPacket(header: header, payload: payload, count: count) }
            }
            let path = TakeEncodingPath(
                key: key, encoding: encoding, takeStart: takeStart, segmentSeconds: segmentSeconds, frameRate: frameRate, catalog: catalog,
                settings: settings, downstream: downstream, capacity: capacity, logger: logger,
                onDropped: { [weak stream] reason, count in stream?.encoderLost(reason: reason, count: count) },
                onEvent: { [weak stream] message in stream?.announceEncoder(message) },
                onPacket: onPacket,
                onFinished: { [weak self] in self?.retire(key) })
            paths[key] = path
            return path
        }
    }

    /// The fullest encoder queue, 0 to 1: part of the host's pressure.
    var queueFill: Double { paths.withLock { $0.values.map(\.fill).max() ?? 0 } }

    /// Every encoder finishes what it holds and hands it on (before the paths stop).
    func shutdown() async {
        let open = paths.withLock { paths in
            defer { paths.removeAll() }
            return Array(paths.values)
        }
        for path in open { await path.shutdown() }
        for task in closing.withLock({ $0 }) { await task.value }
    }

    private func retire(_ key: TakeDeviceKey) {
        guard let path = paths.withLock({ $0.removeValue(forKey: key) }) else { return }
        closing.withLock { tasks in
            tasks.removeAll { $0.isCancelled }
            tasks.append(Task { await path.shutdown() })
        }
    }
}
