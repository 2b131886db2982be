import Dispatch
import FleetBus
import FleetCore
import FleetProtocol
import FleetRecording
import FleetStore
import FleetSystem
import Foundation
import Logging
import Synchronization

/// One device's part of a take on the coordinator, on a thread of its own (every step is
/// blocking disk I/O): takes the part's frames off the recording path in order, writes them
/// into its segments, and answers the agent with credit — what it consumed, what is on disk,
/// and how much more may come. Nothing async in here; the endpoint's thread hands messages
/// in, and what the director must know goes out through `onEvent`.
final class TakeDeviceWriter: @unchecked Sendable {
    enum Input: @unchecked Sendable {
        case resume(routingID: [UInt8], Capfleet_V1_RecordResume)
        case frame(routingID: [UInt8], Capfleet_V1_RecordedFrame, ZMQMessage)
        case end(routingID: [UInt8], Capfleet_V1_RecordEnd)
        /// The take (or this part of it) ends at this fleet time.
        case stop(at: UInt64)
        case note(json: String, at: UInt64)
        case shutdown
    }

    enum Event: Sendable {
        /// A new agent process sends this part: its sequence numbers go on from `offset`.
        case agentChanged(instance: String, restarted: Bool)
        case rebased(offset: Int64)
        /// Frames flow again after an interruption.
        case flowing
        case ended(reason: String, withheld: UInt64)
        case failed(String)
    }

    struct Window: Sendable {
        var frames: Int = 8
        var bytes: Int = 64 << 20
    }

    /// What a part needs of the disk: where its files go, and the free space it never eats
    /// into (below it the part stops while its files can still be finished properly).
    struct DiskReserve: Sendable {
        var directory: String
        var bytes: Int64
    }

    let takeID: String
    let deviceID: String
    let nodeID: String
    private let inbox = Mutex<[Input]>([])
    private let wake = DispatchSemaphore(value: 0)
    private let thread = OwnedThread(name: "cf-take")
    private let send: @Sendable ([UInt8], Capfleet_V1_RecordDown) -> Void
    private let onEvent: @Sendable (Event) -> Void
    private let logger: Logger
    private let window: Window
    private let frameRate: Double
    private let reserve: DiskReserve?
    private var lastSpaceCheck: UInt64 = 0

    // The thread's own state.
    private let recorder: DeviceTakeRecorder
    private var stream: UInt64 = 0
    private var routingID: [UInt8]?
    private var instance: String
    /// Take sequence = device sequence &+ offset.
    private var offset: UInt64
    private var rebaseOnNextFrame = false
    /// Device sequence of the last frame written on this run, and of the last one flushed.
    private var lastWritten: UInt64?
    private var durable: UInt64?
    private var lastFlush: UInt64 = 0
    private var dirty = false
    private var ended: Bool
    private var failed = false
    /// Whether the director heard that frames flow since the last resume.
    private var announcedFlowing = false

    init(takeID: String, deviceID: String, nodeID: String, recorder: DeviceTakeRecorder, instance: String, offset: Int64, ended: Bool,
         frameRate: Double, window: Window = Window(), reserve: DiskReserve? = nil, logger: Logger,
         send: @escaping @Sendable ([UInt8], Capfleet_V1_RecordDown) -> Void, onEvent: @escaping @Sendable (Event) -> Void) {
        self.takeID = takeID
        self.deviceID = deviceID
        self.nodeID = nodeID
        self.recorder = recorder
        self.instance = instance
        self.offset = UInt64(bitPattern: offset)
        self.ended = ended
        self.frameRate = frameRate
        self.window = window
        self.reserve = reserve
        self.send = send
        self.onEvent = onEvent
        var logger = logger
        logger[metadataKey: "take.id"] = "\(takeID)"
        logger[metadataKey: "device.id"] = "\(deviceID)"
        self.logger = logger
        // What a restarted coordinator found in the index is on disk already.
        if let last = recorder.ledger.lastSequence, !instance.isEmpty {
            durable = last &- self.offset
            lastWritten = durable
        }
        thread.start { [self] in run() }
    }

    func post(_ input: Input) {
        inbox.withLock { $0.append(input) }
        wake.signal()
    }

    /// Posts a frame unless the part already has far more waiting than its credit allows
    /// (an agent ignoring its window): false then, and the frame is not taken.
    func post(frame: Capfleet_V1_RecordedFrame, payload: ZMQMessage, routingID: [UInt8]) -> Bool {
        let limit = 2 * window.frames + 16
        let taken = inbox.withLock { queue -> Bool in
            guard queue.count < limit else { return false }
            queue.append(.frame(routingID: routingID, frame, payload))
            return true
        }
        if taken { wake.signal() }
        return taken
    }

    /// Finishes the open segment and ends the thread; resumes once it has.
    func shutdown() async {
        post(.shutdown)
        await thread.join()
    }

    private func run() {
        while true {
            _ = wake.wait(timeout: .now() + .milliseconds(250))
            let work = inbox.withLock { queue in
                defer { queue.removeAll(keepingCapacity: true) }
                return queue
            }
            for input in work {
                if case .shutdown = input {
                    finishSegment()
                    return
                }
                handle(input)
            }
            // Flushed at most every half second: a crash of the coordinator loses nothing
            // the agent was told is stored, and the agent keeps the rest until it is.
            if dirty, MonotonicTime.now() &- lastFlush >= 500_000_000 { flush() }
        }
    }

    private func handle(_ input: Input) {
        switch input {
        case let .resume(routing, resume):
            routingID = routing
            stream += 1
            announcedFlowing = false
            guard !ended, !failed else {
                reply(ended ? .done(Capfleet_V1_RecordDone()) : .refused(.failure(.unavailable, "the recording of \(deviceID) failed")))
                return
            }
            var credit = Capfleet_V1_RecordCredit()
            credit.stream = stream
            if resume.agentInstance != instance {
                let restarted = !instance.isEmpty
                if restarted {
                    // A new agent process numbers its frames anew: the take's sequence goes on
                    // from the last frame it holds, and its drop counts start from zero.
                    if recorder.ledger.lastSequence != nil { rebaseOnNextFrame = true }
                    recorder.restartDropReports()
                    logger.notice("the agent restarted during the take; its part goes on")
                }
                instance = resume.agentInstance
                lastWritten = nil
                durable = nil
                onEvent(.agentChanged(instance: instance, restarted: restarted))
            } else if let last = lastWritten {
                credit.resumeAfter = last
            }
            if let durable { credit.storedThrough = durable }
            if let last = lastWritten { credit.consumedThrough = last }
            reply(.credit(fill(credit)))
        case let .frame(routing, frame, payload):
            routingID = routing
            guard frame.stream == stream, !ended, !failed else { return }
            write(frame, payload: payload)
        case let .end(routing, end):
            routingID = routing
            guard !ended else {
                reply(.done(Capfleet_V1_RecordDone()))
                return
            }
            guard end.stream == stream, !failed else { return }
            finishSegment()
            ended = true
            onEvent(.ended(reason: end.reason.isEmpty ? "stopped" : end.reason, withheld: end.withheldFrames))
            reply(.done(Capfleet_V1_RecordDone()))
        case let .stop(at):
            recorder.stop(at: at)
        case let .note(json, at):
            do {
                try recorder.note(json, at: at)
                dirty = true
            } catch {
                logger.warning("cannot write timed metadata", metadata: ["error": "\(error)"])
            }
        case .shutdown:
            break
        }
    }

    private func write(_ frame: Capfleet_V1_RecordedFrame, payload: ZMQMessage) {
        let header = frame.header
        if let reserve, MonotonicTime.now() &- lastSpaceCheck >= 250_000_000 {
            lastSpaceCheck = MonotonicTime.now()
            if let free = DiskSpace.availableBytes(at: reserve.directory), free < reserve.bytes {
                fail("the disk holding \(reserve.directory) is nearly full: \(free >> 20) MiB free, below the \(reserve.bytes >> 20) MiB kept in reserve. The take stopped; what it holds is finished and plays. Free space (capfleet recordings delete) or set recordings_dir to a larger disk")
                return
            }
        }
        if rebaseOnNextFrame, let last = recorder.ledger.lastSequence {
            offset = (last &+ 1) &- header.sequence
            rebaseOnNextFrame = false
            onEvent(.rebased(offset: Int64(bitPattern: offset)))
        }
        let format = RecordedVideoFormat(pixelFormat: PixelFormat(header.layout.pixelFormat), width: Int(header.layout.width),
                                         height: Int(header.layout.height), frameRate: frameRate)
        let wasEmpty = recorder.ledger.lastSequence == nil
        do {
            let verdict = try recorder.record(payload.bytes, sequence: header.sequence &+ offset, fleetTime: header.fleetTimeNs,
                                              format: format, cumulativeDrops: DropTally(wire: frame.takeDrops))
            if verdict == .keep {
                dirty = true
                // The first frame is on disk at once: the take's start is then a fact.
                if wasEmpty { flush() }
                if !announcedFlowing {
                    announcedFlowing = true
                    onEvent(.flowing)
                }
            }
        } catch {
            fail("cannot write frame \(header.sequence): \(error)")
            return
        }
        lastWritten = header.sequence
        var credit = Capfleet_V1_RecordCredit()
        credit.stream = stream
        credit.consumedThrough = header.sequence
        if let durable { credit.storedThrough = durable }
        reply(.credit(fill(credit)))
    }

    private func flush() {
        lastFlush = MonotonicTime.now()
        dirty = false
        do {
            try recorder.flush()
        } catch {
            fail("cannot flush: \(error)")
            return
        }
        guard let last = lastWritten, durable != last else { return }
        durable = last
        var credit = Capfleet_V1_RecordCredit()
        credit.stream = stream
        credit.storedThrough = last
        credit.consumedThrough = last
        reply(.credit(fill(credit)))
    }

    private func finishSegment() {
        do {
            try recorder.finish()
            if let last = lastWritten { durable = last }
        } catch {
            fail("cannot finish the segment: \(error)")
        }
    }

    /// A write failed (a full disk, most likely): the part stops here, what was written is
    /// finished so it plays, and the agent is told to drop what it holds.
    private func fail(_ message: String) {
        guard !failed else { return }
        failed = true
        logger.error("recording failed", metadata: ["error": "\(message)"])
        _ = try? recorder.finish()
        onEvent(.failed(message))
        reply(.refused(.failure(.internal, "the coordinator cannot go on recording \(deviceID): \(message)")))
    }

    private func fill(_ credit: Capfleet_V1_RecordCredit) -> Capfleet_V1_RecordCredit {
        var credit = credit
        credit.windowFrames = UInt32(window.frames)
        credit.windowBytes = UInt64(window.bytes)
        return credit
    }

    private func reply(_ body: Capfleet_V1_RecordDown.OneOf_Body) {
        guard let routingID else { return }
        var message = Capfleet_V1_RecordDown()
        message.takeID = takeID
        message.deviceID = deviceID
        message.body = body
        send(routingID, message)
    }
}
