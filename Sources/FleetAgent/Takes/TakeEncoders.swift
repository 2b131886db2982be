import FleetCapture
import FleetCore
import FleetEncoding
import FleetProtocol
import Logging
import Synchronization

/// The encoders of this host's takes in progress, one per (take, device): made when an
/// encoded part begins, kept when the coordinator says the same take again (a reconnection
/// must not restart an encoder mid-GOP), and dropped once their part has ended. And the
/// encoders of cameras' encoded pre-rolls (PreRollEncoder), which a take in the same encoding
/// taps instead of encoding the frames again.
final class TakeEncoders: Sendable {
    let catalog: EncoderCatalog
    private let settings: TakeEncodingPath.Settings
    private let logger: Logger
    private let paths = Mutex<[TakeDeviceKey: TakeEncodingPath]>([:])
    private let closing = Mutex<[Task<Void, Never>]>([])
    /// The cameras' encoded pre-rolls' encoders, by device, for the queue figure and shutdown.
    private let preRolls = Mutex<[String: PreRollEncoder]>([:])
    /// Parts that tap a pre-roll's encoder: said again, they keep their tap.
    private let taps = Mutex<[TakeDeviceKey: PreRollTap]>([:])

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

    /// The camera's pre-roll was set: an encoded one gets an encoder of its own (the one it
    /// had when the encoding is the same); one that was encoded and is no longer, or in
    /// another encoding, retires its encoder once the takes tapping it have ended.
    func preRollChanged(on stream: CameraStream, to settings: PreRollSettings) {
        let wanted = settings.isEncoded ? settings.encoding : nil
        let (retired, made) = stream.preRollEncoder.withLock { current -> (PreRollEncoder?, PreRollEncoder?) in
            if current?.encoding == wanted { return (nil, nil) }
            let old = current
            current = wanted.map { encoding in
                PreRollEncoder(
                    encoding: encoding, deviceID: stream.deviceID, frameRate: stream.source.activeFrameRate, catalog: catalog,
                    settings: self.settings, keeper: stream.preRoll, logger: logger,
                    onDropped: { [weak stream] reason, count in stream?.encoderLost(reason: reason, count: count) },
                    onEvent: { [weak stream] message in stream?.announceEncoder(message) })
            }
            return (old, current)
        }
        retired?.retire()
        preRolls.withLock { $0[stream.deviceID] = made ?? (retired == nil ? $0[stream.deviceID] : nil) }
        if let retired { retiring(retired) }
    }

    /// A retired pre-roll encoder ends with its last take; its thread is joined then.
    private func retiring(_ encoder: PreRollEncoder) {
        closing.withLock { tasks in
            tasks.removeAll { $0.isCancelled }
            tasks.append(
                Task {
                    while encoder.isTapped { try? await Task.sleep(for: .milliseconds(200)) }
                    await encoder.shutdown()
                })
        }
    }

    /// The path for the part: its encoder in front of `downstream`, the same one when the
    /// part is said again; or, when the camera's pre-roll is kept in this very encoding, a
    /// tap of the pre-roll's encoder (recordings.md, "Encoded pre-roll").
    func path(
        for key: TakeDeviceKey, encoding: TakeEncoding, takeStart: UInt64, segmentSeconds: Int, frameRate: Double,
        downstream: any TakeFramePath, stream: CameraStream
    ) -> any TakeFramePath {
        if let tap = taps.withLock({ taps in
            taps = taps.filter { !$0.value.isFinished }
            return taps[key]
        }) {
            return tap
        }
        if let preRoll = stream.preRollEncoder.withLock({ $0 }), preRoll.encoding == encoding,
            paths.withLock({ $0[key] == nil })
        {
            var onPacket: (@Sendable (Capfleet_V1_FrameHeader, FrameBuffer, Int) -> Void)?
            if !downstream.reachesCoordinator {
                onPacket = { [weak stream] header, payload, count in stream?.offerEncodedPacket(header: header, payload: payload, count: count) }
            }
            let tap = preRoll.tap(
                takeID: key.takeID, deviceID: key.deviceID, start: takeStart, segmentSeconds: segmentSeconds, downstream: downstream,
                onPacket: onPacket)
            taps.withLock { $0[key] = tap }
            return tap
        }
        return paths.withLock { paths in
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
    var queueFill: Double {
        max(paths.withLock { $0.values.map(\.fill).max() ?? 0 }, preRolls.withLock { $0.values.map(\.queueFill).max() ?? 0 })
    }

    /// Every encoder finishes what it holds and hands it on (before the paths stop).
    func shutdown() async {
        let open = paths.withLock { paths in
            defer { paths.removeAll() }
            return Array(paths.values)
        }
        for path in open { await path.shutdown() }
        for encoder in preRolls.withLock({ preRolls in
            defer { preRolls.removeAll() }
            return Array(preRolls.values)
        }) {
            await encoder.shutdown()
        }
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
