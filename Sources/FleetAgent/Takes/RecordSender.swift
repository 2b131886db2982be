import FleetBus
import FleetCapture
import FleetCore
import FleetProtocol
import FleetSystem
import Foundation
import Logging
import Synchronization

/// How much a recording may keep waiting on this host before frames are dropped as out of
/// buffers: first in memory, then on disk.
public struct RecordSpoolLimits: Sendable, Equatable {
    public var memoryBytes: Int
    public var diskBytes: Int64
    public var directory: String

    public init(memoryBytes: Int = 256 << 20, diskBytes: Int64 = 4 << 30, directory: String) {
        self.memoryBytes = memoryBytes
        self.diskBytes = diskBytes
        self.directory = directory
    }
}

/// The agent's end of the lossless recording path (frames.md, "The recording path"): a
/// DEALER of its own, on a thread of its own, that sends each recorded device's frames
/// under the coordinator's credit and keeps them until the coordinator has them on disk. A
/// slow or unreachable coordinator costs spool space, never a stalled camera: frames wait in
/// memory, then on disk, and only beyond both are they dropped, counted as out of buffers.
public final class RecordSender: Sendable {
    private let loop: SocketLoop
    private let dealer: SocketLoop.SocketID
    /// The spools: the sender thread's alone.
    private let state: ThreadBound<SenderState>
    private let totals = SpoolTotals()
    private let connectedEndpoint = SocketEndpoint()
    /// Frames handed in by capture threads and not yet spooled by the sender's thread.
    private let handoffBytes = Atomic<Int>(0)
    private let limits: RecordSpoolLimits
    private let logger: Logger

    /// `agentInstance` names this agent process (as its HELLO does): a new one tells the
    /// coordinator the agent restarted.
    public init(
        context: ZMQContext, coordinatorKey: CurvePublicKey, keys: CurveKeyPair, limits: RecordSpoolLimits,
        agentInstance: String, logger: Logger
    ) throws(ZMQError) {
        let socket = try ZMQSocket(context: context, type: .dealer)
        try socket.makeCurveClient(serverKey: coordinatorKey, keys: keys)
        try socket.use(.bulk)
        // Nothing is queued for a coordinator that is not there: it waits in the spool.
        try socket.set(SocketSetup.agentRecordLink)
        // Leftovers of an earlier run: this run's resumes start from what it captures.
        if FileManager.default.fileExists(atPath: limits.directory) {
            do {
                try FileManager.default.removeItem(atPath: limits.directory)
            } catch {
                logger.warning("cannot remove the recording spool of an earlier run", metadata: ["path": "\(limits.directory)", "error": "\(error)"])
            }
        }
        let loop = SocketLoop(name: "record")
        self.loop = loop
        let state = loop.bind(SenderState(limits: limits, totals: totals, instance: agentInstance, logger: logger))
        self.state = state
        dealer = loop.add(
            socket, onReadable: { socket in state.value.receive(from: socket) },
            onWritable: { sockets in state.value.pump(sockets) })
        // Told on the loop's thread, before anything else runs there.
        loop.perform { [dealer] _ in state.value.socketID = dealer }
        loop.every(nanoseconds: 250_000_000) { sockets in state.value.tick(sockets) }
        self.limits = limits
        self.logger = logger
        loop.start()
    }

    public func stop() { loop.stop() }

    /// Points the DEALER at the coordinator's recording endpoint (from WELCOME). Every part
    /// asks where to go on from: the coordinator may have restarted or lost what was in flight.
    public func connect(to endpoint: String) {
        let dealer = self.dealer, logger = self.logger, state = self.state
        connectedEndpoint.move(
            dealer, of: loop, to: endpoint,
            failed: { error in
                logger.error("cannot connect the recording socket", metadata: ["endpoint": "\(endpoint)", "error": "\(error)"])
            }, then: { sockets in state.value.connectionRenewed(sockets) })
    }

    /// The device's part of `takeID` begins (idempotent: a repeated start keeps the spool).
    func begin(takeID: String, deviceID: String) {
        let state = self.state
        loop.perform { sockets in state.value.begin(TakeDeviceKey(takeID: takeID, deviceID: deviceID), sockets) }
    }

    /// Called on a capture thread; never blocks. False when the frame could not be taken
    /// (the hand-off is full): the caller counts it as out of buffers.
    func submit(
        takeID: String, deviceID: String, header: Capfleet_V1_FrameHeader, takeDrops: DropTally,
        pixels: FrameBuffer, count: Int
    ) -> Bool {
        // What waits between threads is bounded too: a stuck disk must not grow memory.
        guard handoffBytes.load(ordering: .relaxed) + count <= max(limits.memoryBytes / 4, 16 << 20) else { return false }
        handoffBytes.add(count, ordering: .relaxed)
        let state = self.state
        let frame = SpooledFrame(header: header, takeDrops: takeDrops, pixels: .memory(SpooledBytes(buffer: pixels, count: count)))
        loop.perform { [self] sockets in
            handoffBytes.subtract(count, ordering: .relaxed)
            state.value.spool(frame, for: TakeDeviceKey(takeID: takeID, deviceID: deviceID), sockets)
        }
        return true
    }

    /// The device's part ends after the frames submitted so far. With `withholding`, consent
    /// was withdrawn: frames not yet sent stay here and are dropped unsent.
    func end(takeID: String, deviceID: String, takeDrops: DropTally, reason: String, withholding: Bool) {
        let state = self.state
        loop.perform { sockets in
            state.value.end(
                TakeDeviceKey(takeID: takeID, deviceID: deviceID), takeDrops: takeDrops, reason: reason, withholding: withholding, sockets)
        }
    }

    /// Frames and bytes waiting to be stored, all recorded devices (for status).
    public var spooled: (frames: Int, bytes: Int64) { totals.value.withLock { $0 } }
}

struct TakeDeviceKey: Hashable, Sendable {
    let takeID: String
    let deviceID: String
}

/// Frames and bytes waiting to be stored, written by the sender's thread for anyone to read.
private final class SpoolTotals: Sendable {
    let value = Mutex<(frames: Int, bytes: Int64)>((0, 0))
}

/// The sender's thread's own state: one spool per recorded device. Bound to that thread
/// (`ThreadBound`): any other use stops the process.
private final class SenderState {
    let limits: RecordSpoolLimits
    let logger: Logger
    var socketID: SocketLoop.SocketID?
    let instance: String
    private let totals: SpoolTotals
    private var parts: [TakeDeviceKey: DevicePart] = [:]
    private var memoryInUse = 0

    final class DevicePart {
        var flow = RecordFlow<SpooledFrame>()
        var disk: DiskSpool?
        /// Frames the spool itself dropped (both tiers full).
        var spoolDrops: UInt64 = 0
        var end: (takeDrops: DropTally, withheld: UInt64, reason: String)?
    }

    init(limits: RecordSpoolLimits, totals: SpoolTotals, instance: String, logger: Logger) {
        self.instance = instance
        self.limits = limits
        self.totals = totals
        self.logger = logger
    }

    func begin(_ key: TakeDeviceKey, _ sockets: SocketLoop.Sockets) {
        guard parts[key] == nil else { return }
        parts[key] = DevicePart()
        logger.info("recording", metadata: ["take.id": "\(key.takeID)", "device.id": "\(key.deviceID)"])
        tick(sockets)
    }

    func connectionRenewed(_ sockets: SocketLoop.Sockets) {
        for part in parts.values { part.flow.connectionRenewed() }
        tick(sockets)
    }

    func spool(_ frame: SpooledFrame, for key: TakeDeviceKey, _ sockets: SocketLoop.Sockets) {
        guard let part = parts[key], !part.flow.endQueued, !part.flow.isDone,
            case let .memory(buffer) = frame.pixels
        else { return }
        var frame = frame
        // Drops of the spool count for the frames after them: the gap they leave.
        frame.takeDrops.outOfBuffers += part.spoolDrops
        if part.flow.lastSequence.map({ frame.header.sequence <= $0 }) ?? false { return }
        if memoryInUse + buffer.count > limits.memoryBytes {
            do throws(SpoolError) {
                if part.disk == nil {
                    part.disk = try DiskSpool(directory: limits.directory + "/" + Self.safe(key.takeID) + "/" + Self.safe(key.deviceID))
                }
                guard totalOnDisk + Int64(buffer.count) <= limits.diskBytes else {
                    throw SpoolError.full(memoryBytes: limits.memoryBytes, diskBytes: limits.diskBytes)
                }
                frame.pixels = try part.disk!.append(UnsafeRawBufferPointer(start: buffer.buffer.storage, count: buffer.count))
            } catch {
                if part.spoolDrops == 0 || part.spoolDrops.isMultiple(of: 100) {
                    logger.warning(
                        "recorded frame dropped", metadata: ["device.id": "\(key.deviceID)", "take.id": "\(key.takeID)", "reason": "\(error)"])
                }
                part.spoolDrops += 1
                return
            }
        } else {
            memoryInUse += buffer.count
        }
        part.flow.append(sequence: frame.header.sequence, bytes: buffer.count, payload: frame)
        updateTotals()
        pump(sockets)
    }

    func end(_ key: TakeDeviceKey, takeDrops: DropTally, reason: String, withholding: Bool, _ sockets: SocketLoop.Sockets) {
        guard let part = parts[key], part.end == nil else { return }
        var withheld: UInt64 = 0
        if withholding {
            let kept = part.flow.withholdUnsent()
            withheld = UInt64(kept.count)
            release(kept, of: part)
        }
        var drops = takeDrops
        drops.outOfBuffers += part.spoolDrops
        part.end = (drops, withheld, reason)
        part.flow.queueEnd()
        logger.info(
            "recording ends",
            metadata: [
                "take.id": "\(key.takeID)", "device.id": "\(key.deviceID)", "reason": "\(reason)",
                "withheld": "\(withheld)",
            ])
        pump(sockets)
    }

    func receive(from socket: ZMQSocket) {
        while let received = try? socket.receiveMultipart(dontWait: true, maxParts: 2) {
            guard received.parts.count == 1, let message = try? Capfleet_V1_RecordDown(serializedBytes: received.parts[0].array) else {
                logger.warning("the coordinator sent something that is not a RecordDown on the recording path")
                continue
            }
            let key = TakeDeviceKey(takeID: message.takeID, deviceID: message.deviceID)
            guard let part = parts[key] else { continue }
            switch message.body {
            case let .credit(credit)?:
                release(part.flow.apply(RecordCredit(wire: credit), now: MonotonicTime.now()), of: part)
            case .done?:
                release(part.flow.finish(), of: part)
                part.disk?.removeAll()
                parts[key] = nil
                logger.info("recording stored", metadata: ["take.id": "\(key.takeID)", "device.id": "\(key.deviceID)"])
            case let .refused(status)?:
                logger.error(
                    "the coordinator refused a recording; its spool is dropped",
                    metadata: ["take.id": "\(key.takeID)", "device.id": "\(key.deviceID)", "reason": "\(status.reason)"])
                release(part.flow.finish(), of: part)
                part.disk?.removeAll()
                parts[key] = nil
            case .indexed?, .fetch?, .check?, .collected?, .deletePart?, .note?, .fetchStill?, .stillCollected?, .stillIndexed?, .offload?, nil:
                // The recordings link's (takes written on this host), never this socket's.
                continue
            }
        }
        updateTotals()
    }

    /// Every 250 ms: resumes that are due, and whatever credit allows.
    func tick(_ sockets: SocketLoop.Sockets) {
        guard let socketID else { return }
        let now = MonotonicTime.now()
        for (key, part) in parts where part.flow.shouldAskToResume(now: now) {
            let resume = message(
                key,
                .resume(
                    .with {
                        $0.agentInstance = instance
                        $0.spooledFrames = UInt64(part.flow.waitingFrames)
                        $0.spooledBytes = UInt64(part.flow.waitingBytes)
                    }))
            guard let bytes: [UInt8] = try? resume.serializedBytes(),
                (try? sockets[socketID].send(bytes, dontWait: true)) == true
            else { continue }
            part.flow.askedToResume(now: now)
        }
        pump(sockets)
    }

    /// Sends what credit allows; asks for POLLOUT when the socket takes no more.
    func pump(_ sockets: SocketLoop.Sockets) {
        guard let socketID else { return }
        let socket = sockets[socketID]
        var blocked = false
        for (key, part) in parts {
            sending: while !blocked, let stream = part.flow.stream {
                switch part.flow.nextStep() {
                case .idle:
                    break sending
                case let .frame(_, frame):
                    do {
                        guard try send(frame, stream: stream, key: key, part: part, on: socket) else {
                            blocked = true
                            break sending
                        }
                        part.flow.markSent()
                    } catch {
                        logger.error("cannot send a recorded frame", metadata: ["device.id": "\(key.deviceID)", "error": "\(error)"])
                        break sending
                    }
                case .end:
                    let end = part.end ?? (DropTally(), 0, "stopped")
                    let ending = message(
                        key,
                        .end(
                            .with {
                                $0.stream = stream
                                $0.takeDrops = end.takeDrops.wire
                                $0.withheldFrames = end.withheld
                                $0.reason = end.reason
                            }))
                    guard let bytes: [UInt8] = try? ending.serializedBytes(),
                        (try? socket.send(bytes, dontWait: true)) == true
                    else {
                        blocked = true
                        break sending
                    }
                    part.flow.markEndSent()
                }
            }
        }
        sockets.setWantsWritable(socketID, blocked)
    }

    private func send(_ frame: SpooledFrame, stream: UInt64, key: TakeDeviceKey, part: DevicePart, on socket: ZMQSocket) throws -> Bool {
        let pixels: SpooledBytes
        switch frame.pixels {
        case let .memory(held): pixels = held
        case let .disk(file, offset, length):
            guard let disk = part.disk else { throw SpoolError.spoolGone(directory: limits.directory, file: file) }
            pixels = try disk.read(file: file, offset: offset, length: length)
        }
        let bytes: [UInt8] = try message(
            key,
            .frame(
                .with {
                    $0.stream = stream
                    $0.header = frame.header
                    $0.takeDrops = frame.takeDrops.wire
                })
        ).serializedBytes()
        guard try socket.send(bytes, more: true, dontWait: true) else { return false }
        // Once the first part is queued libzmq takes the rest of the message.
        _ = try socket.sendZeroCopy(pixels.buffer.storage, count: pixels.count, owner: pixels.buffer)
        return true
    }

    private func release(_ frames: [SpooledFrame], of part: DevicePart) {
        for frame in frames {
            switch frame.pixels {
            case let .memory(buffer): memoryInUse -= buffer.count
            case let .disk(file, _, length): part.disk?.release(file: file, length: length)
            }
        }
    }

    /// A RecordUp for `key` with `body`.
    private func message(_ key: TakeDeviceKey, _ body: Capfleet_V1_RecordUp.OneOf_Body) -> Capfleet_V1_RecordUp {
        .with {
            $0.protocolVersion = WireDefaults.protocolMajor
            $0.takeID = key.takeID
            $0.deviceID = key.deviceID
            $0.body = body
        }
    }

    private var totalOnDisk: Int64 { parts.values.reduce(0) { $0 + ($1.disk?.bytesOnDisk ?? 0) } }

    private func updateTotals() {
        let frames = parts.values.reduce(0) { $0 + $1.flow.waitingFrames }
        let bytes = parts.values.reduce(Int64(0)) { $0 + Int64($1.flow.waitingBytes) }
        totals.value.withLock { $0 = (frames, bytes) }
    }

    /// Ids become directory names: nothing but what is safe in one.
    private static func safe(_ id: String) -> String {
        String(id.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." ? $0 : "_" })
    }
}

extension RecordCredit {
    init(wire: Capfleet_V1_RecordCredit) {
        self.init(
            stream: wire.stream, resumeAfter: wire.hasResumeAfter ? wire.resumeAfter : nil,
            storedThrough: wire.hasStoredThrough ? wire.storedThrough : nil,
            consumedThrough: wire.hasConsumedThrough ? wire.consumedThrough : nil,
            windowFrames: Int(wire.windowFrames), windowBytes: Int(clamping: wire.windowBytes))
    }
}
