import FleetBus
import FleetCapture
import FleetCore
import FleetProtocol
import FleetSystem
import Logging
import Synchronization

/// The live frame path: newest frame wins. Capture threads hand frames in; the publisher
/// thread keeps at most `capacity` of them waiting for the PUSH socket, and when a newer
/// frame arrives to a full queue the oldest is dropped and counted as `late`. A slow
/// network or coordinator therefore costs late drops, never a stalled camera or growing
/// memory, while a fast one gets every frame. Payloads go out without a copy: libzmq holds
/// the frame buffer until it is on the wire.
public final class FramePublisher: Sendable {
    private let loop: SocketLoop
    private let push: SocketLoop.SocketID
    private let capacity: Int
    /// Frames submitted and not yet sent or dropped (the send-queue depth reported in status).
    private let inFlight = Atomic<Int>(0)
    private let connectedEndpoint = SocketEndpoint()
    private let logger: Logger
    /// The frames waiting for the socket: the publisher thread's alone.
    private let outbox: ThreadBound<Outbox>

    public init(context: ZMQContext, capacity: Int, coordinatorKey: CurvePublicKey, keys: CurveKeyPair, logger: Logger) throws(ZMQError) {
        let socket = try ZMQSocket(context: context, type: .push)
        try socket.makeCurveClient(serverKey: coordinatorKey, keys: keys)
        try socket.use(.bulk)
        // Do not queue frames for a coordinator that is not there: they wait here instead,
        // where newer frames replace them.
        try socket.set([.sendQueue(messages: 2), .onlyCompletedConnections])
        let loop = SocketLoop(name: "frames")
        self.loop = loop
        let outbox = loop.bind(Outbox(capacity: capacity, logger: logger))
        self.outbox = outbox
        push = loop.add(socket, onWritable: { sockets in outbox.value.flush(sockets) })
        // Told on the loop's thread, before anything else runs there.
        loop.perform { [push] _ in outbox.value.socketID = push }
        self.capacity = capacity
        self.logger = logger
        loop.start()
    }

    public var queueDepth: Int { min(inFlight.load(ordering: .relaxed), capacity) }
    public var queueCapacity: Int { capacity }

    /// Points the PUSH socket at the coordinator's ingest endpoint (from WELCOME).
    public func connect(to endpoint: String) {
        let logger = self.logger
        connectedEndpoint.move(push, of: loop, to: endpoint) { error in
            logger.error("cannot connect the frame socket", metadata: ["endpoint": "\(endpoint)", "error": "\(error)"])
        }
    }

    /// Called on a capture thread; never blocks.
    public func submit(_ frame: CapturedFrame, header: Capfleet_V1_FrameHeader, statistics: DeviceStatistics) {
        submit(frame.buffer, byteCount: frame.byteCount, header: header, statistics: statistics)
    }

    /// A payload of `byteCount` bytes of `buffer` (a frame, or a microphone's block of samples).
    public func submit(_ buffer: FrameBuffer, byteCount: Int, header: Capfleet_V1_FrameHeader, statistics: DeviceStatistics) {
        inFlight.add(1, ordering: .relaxed)
        let outbox = self.outbox
        loop.perform { [self] sockets in
            outbox.value.enqueue(
                PendingFrame(
                    buffer: buffer, byteCount: byteCount, header: header, statistics: statistics,
                    done: { [self] in
                        inFlight.subtract(1, ordering: .relaxed)
                    }))
            outbox.value.flush(sockets)
        }
    }

    /// Runs `work` with the outbox on the publisher thread.
    func onPublisherThread(_ work: @escaping @Sendable (inout Outbox, SocketLoop.Sockets) -> Void) {
        let outbox = self.outbox
        loop.perform { sockets in work(&outbox.value, sockets) }
    }

    public func stop() { loop.stop() }
}

struct PendingFrame {
    let buffer: FrameBuffer
    let byteCount: Int
    let header: Capfleet_V1_FrameHeader
    let statistics: DeviceStatistics
    let done: () -> Void
}

/// Frames waiting for the socket; lives on the publisher thread only (a `ThreadBound`).
struct Outbox {
    let capacity: Int
    let logger: Logger
    var socketID: SocketLoop.SocketID?
    /// Previews, beside the frames and before them (FramePublisher+Previews.swift).
    var previews = PreviewSlots()
    private var pending: [PendingFrame] = []
    private var head = 0

    init(capacity: Int, logger: Logger) {
        self.capacity = capacity
        self.logger = logger
    }

    mutating func enqueue(_ frame: PendingFrame) {
        pending.append(frame)
        while pending.count - head > capacity {
            let oldest = pending[head]
            head += 1
            oldest.statistics.late.add(1, ordering: .relaxed)
            oldest.done()
        }
    }

    /// Sends what the socket takes now; asks for POLLOUT when it takes no more.
    mutating func flush(_ sockets: SocketLoop.Sockets) {
        guard let socketID else { return }
        let socket = sockets[socketID]
        previews.send(on: socket)
        while previews.isEmpty, head < pending.count {
            let next = pending[head]
            var header = next.header
            header.sendMonotonicNs = MonotonicTime.now()
            do {
                let headerBytes: [UInt8] = try header.serializedBytes()
                guard try socket.send(headerBytes, more: true, dontWait: true) else { break }
                // Once the first part is queued libzmq accepts the rest of the message.
                try socket.sendZeroCopy(next.buffer.storage, count: next.byteCount, owner: next.buffer)
                next.statistics.framesSent.add(1, ordering: .relaxed)
                next.statistics.bytesSent.add(UInt64(next.byteCount), ordering: .relaxed)
            } catch {
                next.statistics.late.add(1, ordering: .relaxed)
                logger.warning("frame send failed", metadata: ["device.id": "\(header.deviceID)", "error": "\(error)"])
            }
            head += 1
            next.done()
        }
        if head == pending.count {
            pending.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 64 {
            pending.removeFirst(head)
            head = 0
        }
        sockets.setWantsWritable(socketID, head < pending.count || !previews.isEmpty)
    }
}
