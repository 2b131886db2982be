import CZeroMQ
import FleetBus
import FleetCapture
import FleetCore
import FleetProtocol
import Logging
import Synchronization

/// The live frame path: newest frame wins. Capture threads hand frames in; a bounded
/// queue in front of a PUSH socket (high-water mark 2, never blocking) means a slow
/// network or coordinator costs `late` drops, never a stalled camera or growing memory.
/// Payloads go out without a copy: libzmq holds the frame buffer until it is on the wire.
public final class FramePublisher: Sendable {
    private let loop: SocketLoop
    private let push: SocketLoop.SocketID
    private let capacity: Int
    private let queued = Atomic<Int>(0)
    private let connectedEndpoint = Mutex<String?>(nil)
    private let logger: Logger

    public init(context: ZMQContext, capacity: Int, logger: Logger) throws(ZMQError) {
        let socket = try ZMQSocket(context: context, type: .push)
        try socket.setOption(ZMQ_SNDHWM, Int32(2))
        // Do not queue frames for a coordinator that is not there: drop them as late.
        try socket.setOption(ZMQ_IMMEDIATE, Int32(1))
        loop = SocketLoop(name: "frames")
        push = loop.add(socket)
        self.capacity = capacity
        self.logger = logger
        loop.start()
    }

    public var queueDepth: Int { queued.load(ordering: .relaxed) }
    public var queueCapacity: Int { capacity }

    /// Points the PUSH socket at the coordinator's ingest endpoint (from WELCOME).
    public func connect(to endpoint: String) {
        let previous = connectedEndpoint.withLock { current -> String? in
            defer { current = endpoint }
            return current
        }
        guard previous != endpoint else { return }
        let push = self.push, logger = self.logger
        loop.perform { sockets in
            do {
                if let previous { try? sockets[push].disconnect(previous) }
                try sockets[push].connect(endpoint)
            } catch {
                logger.error("cannot connect the frame socket", metadata: ["endpoint": "\(endpoint)", "error": "\(error)"])
            }
        }
    }

    /// Called on a capture thread. Never blocks: a full queue drops the frame as late.
    public func submit(_ frame: CapturedFrame, header: Capfleet_V1_FrameHeader, statistics: DeviceStatistics) {
        guard queued.wrappingAdd(1, ordering: .relaxed).newValue <= capacity else {
            queued.wrappingSubtract(1, ordering: .relaxed)
            statistics.late.add(1, ordering: .relaxed)
            return
        }
        let push = self.push, logger = self.logger
        loop.perform { [self] sockets in
            queued.wrappingSubtract(1, ordering: .relaxed)
            var header = header
            header.sendMonotonicNs = MonotonicTime.now()
            do {
                let headerBytes: [UInt8] = try header.serializedBytes()
                guard try sockets[push].send(headerBytes, more: true, dontWait: true) else {
                    statistics.late.add(1, ordering: .relaxed)
                    return
                }
                // Once the first part is queued libzmq accepts the rest of the message.
                try sockets[push].sendZeroCopy(frame.buffer.storage, count: frame.byteCount, owner: frame.buffer)
                statistics.framesSent.add(1, ordering: .relaxed)
                statistics.bytesSent.add(UInt64(frame.byteCount), ordering: .relaxed)
            } catch {
                statistics.late.add(1, ordering: .relaxed)
                logger.warning("frame send failed", metadata: ["device.id": "\(header.deviceID)", "error": "\(error)"])
            }
        }
    }

    public func stop() { loop.stop() }
}
