import FleetBus
import FleetCore
import FleetProtocol
import FleetRecording
import FleetStore
import Foundation
import Logging

/// The state of one device's part of a take, on its writer's thread only (made there by
/// `TakeDeviceWriter`'s worker): the recorder, the stream it accepts frames on, what is
/// written and what is flushed. Every step is blocking disk I/O.
final class TakePartWriter {
    typealias Input = TakeDeviceWriter.Input
    typealias Event = TakeDeviceWriter.Event

    let takeID: String
    let deviceID: String
    private let send: @Sendable ([UInt8], Capfleet_V1_RecordDown) -> Void
    private let onEvent: @Sendable (Event) -> Void
    private let logger: Logger
    private let window: TakeDeviceWriter.Window
    private let frameRate: Double
    private let reserve: TakeDeviceWriter.DiskReserve?
    private var lastSpaceCheck: UInt64 = 0
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

    init(
        takeID: String, deviceID: String, recorder: DeviceTakeRecorder, instance: String, offset: Int64, ended: Bool,
        frameRate: Double, window: TakeDeviceWriter.Window, reserve: TakeDeviceWriter.DiskReserve?, logger: Logger,
        send: @escaping @Sendable ([UInt8], Capfleet_V1_RecordDown) -> Void, onEvent: @escaping @Sendable (Event) -> Void
    ) {
        self.takeID = takeID
        self.deviceID = deviceID
        self.recorder = recorder
        self.instance = instance
        self.offset = UInt64(bitPattern: offset)
        self.ended = ended
        self.frameRate = frameRate
        self.window = window
        self.reserve = reserve
        self.send = send
        self.onEvent = onEvent
        self.logger = logger
        // What a restarted coordinator found in the index is on disk already.
        if let last = recorder.ledger.lastSequence, !instance.isEmpty {
            durable = last &- self.offset
            lastWritten = durable
        }
    }

    /// After every batch and at least every 250 ms.
    func flushIfDue() {
        if dirty, MonotonicTime.now() &- lastFlush >= 500_000_000 { flush() }
    }

    func handle(_ input: Input) {
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
            recorder.ended(cumulativeDrops: DropTally(wire: end.takeDrops))
            finishSegment()
            ended = true
            // The frames are on disk: the agent may let go of them now.
            reply(.done(Capfleet_V1_RecordDone()))
            reportEnded(reason: end.reason.isEmpty ? "stopped" : end.reason, withheld: end.withheldFrames)
        case let .stop(at):
            recorder.stop(at: at)
        case let .note(json, at, track):
            do {
                try recorder.note(json, at: at, track: track)
                dirty = true
            } catch {
                logger.warning("cannot write timed metadata", metadata: ["error": "\(error)"])
            }
        }
    }

    private func write(_ frame: Capfleet_V1_RecordedFrame, payload: ZMQMessage) {
        let header = frame.header
        if let reserve, MonotonicTime.now() &- lastSpaceCheck >= 250_000_000 {
            lastSpaceCheck = MonotonicTime.now()
            if let free = DiskSpace.availableBytes(at: reserve.directory), free < reserve.bytes {
                fail(
                    "the disk holding \(reserve.directory) is nearly full: \(free >> 20) MiB free, below the \(reserve.bytes >> 20) MiB kept in reserve. The take stopped; what it holds is finished and plays. Free space (capfleet recordings delete) or set recordings_dir to a larger disk"
                )
                return
            }
        }
        if rebaseOnNextFrame, let last = recorder.ledger.lastSequence {
            offset = (last &+ 1) &- header.sequence
            rebaseOnNextFrame = false
            onEvent(.rebased(offset: Int64(bitPattern: offset)))
        }
        let format = RecordedVideoFormat(header: header, frameRate: frameRate)
        let wasEmpty = recorder.ledger.lastSequence == nil
        do {
            let verdict = try recorder.record(
                payload.bytes, sequence: header.sequence &+ offset, fleetTime: header.fleetTimeNs,
                format: format, cumulativeDrops: DropTally(wire: frame.takeDrops), keyFrame: header.isKeyFrame, settingsNote: header.processingNote,
                framing: header.framingCrop,
                framingOptical: header.framingOptical)
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

    func finishSegment() {
        do {
            try recorder.finish()
            if let last = lastWritten { durable = last }
        } catch {
            fail("cannot finish the segment: \(error)")
        }
    }

    /// The part is stored once its last segment is closed and every segment's SHA-256 is in
    /// the index: only then does the director hear it ended, so that when a stop is answered
    /// the take can be exported and verified at once (both check the files against the index).
    /// The checksums are made on the hasher's thread; this part's thread has nothing else
    /// left to do meanwhile.
    private func reportEnded(reason: String, withheld: UInt64) {
        do {
            try recorder.waitForChecksums()
        } catch {
            fail("cannot checksum the part's segments: \(error)")
            return
        }
        onEvent(.ended(reason: reason, withheld: withheld))
    }

    /// A write failed (a full disk, most likely): the part stops here, what was written is
    /// finished so it plays, and the agent is told to drop what it holds (unless it heard
    /// the part is done already).
    private func fail(_ message: String) {
        guard !failed else { return }
        failed = true
        logger.error("recording failed", metadata: ["error": "\(message)"])
        do {
            try recorder.finish()
        } catch {
            // The failure itself is reported below; what finishing it says too goes to the log.
            logger.error("cannot finish the segment after the failure", metadata: ["error": "\(error)"])
        }
        onEvent(.failed(message))
        if !ended { reply(.refused(.failure(.internal, "the coordinator cannot go on recording \(deviceID): \(message)"))) }
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
