import FleetCapture
import FleetCore
import FleetEncoding
import FleetProtocol
import FleetSystem
import Foundation
import Logging
import Synchronization

/// A take's frames on their way to its path (`RecordSender` or `AgentTakeStore`), encoded
/// first on a thread of this device's own: raw frames in from the capture thread, packets
/// out to the path, so encoded takes cross the network and reach the disk as packets. The
/// capture thread never waits: when the encoder is that far behind, the frame is refused and
/// counted as `encoder_late`. Compressed camera frames (MJPEG, H.264) pass as they are.
final class TakeEncodingPath: TakeFramePath, Sendable {
    enum Input: Sendable {
        case frame(header: Capfleet_V1_FrameHeader, takeDrops: DropTally, pixels: FrameBuffer, count: Int)
        /// A take's pre-roll in one message: it counts once against the queue's capacity.
        case frames([PreRollFrame], takeDrops: DropTally)
        case end(takeDrops: DropTally, reason: String, withholding: Bool)
        /// An encoded pre-roll's take (PreRollEncoder.swift): from `start` on, a key frame
        /// opens every `every` of fleet time, as the take's own encoder would make them for
        /// its segments; nil `every` forgets the schedule.
        case keyFrames(id: String, start: UInt64, every: UInt64?)
        /// Runs on the encoder's thread between the frames before and after it.
        case perform(@Sendable () -> Void)
    }

    /// How the encoder runs on this host (settings `encoder_threads`, `encoder_preset`).
    struct Settings: Sendable, Equatable {
        var threads: Int
        var preset: String
    }

    let key: TakeDeviceKey
    let encoding: TakeEncoding
    private let downstream: any TakeFramePath
    private let worker: OwnedWorker<Input>
    private let capacity: Int
    private let ended = Atomic<Bool>(false)
    private let peak = TakeQueuePeak()

    /// - Parameters:
    ///   - capacity: frames that may wait for the encoder; past it a frame is `encoder_late`.
    ///   - onDropped: frames the encoder lost on its thread (late, or a packet the path could
    ///     not take and what had to be left out with it), for the device's counters. The
    ///     take's drops carry them in the packets that follow and in the part's end.
    ///   - onEvent: what the device's events should say (which encoder, a fallback).
    ///   - onFinished: on the encoder's thread, after the path heard the part's end.
    init(
        key: TakeDeviceKey, encoding: TakeEncoding, takeStart: UInt64, segmentSeconds: Int, frameRate: Double, catalog: EncoderCatalog,
        settings: Settings, downstream: any TakeFramePath, capacity: Int, logger: Logger,
        onDropped: @escaping @Sendable (DropReason, UInt64) -> Void, onEvent: @escaping @Sendable (String) -> Void,
        onPacket: (@Sendable (Capfleet_V1_FrameHeader, FrameBuffer, Int) -> Void)? = nil,
        wantsKeyFrame: (@Sendable () -> Bool)? = nil, subject: String? = nil,
        onFinished: @escaping @Sendable () -> Void
    ) {
        self.key = key
        self.encoding = encoding
        self.downstream = downstream
        self.capacity = max(capacity, 1)
        var logger = logger
        logger[metadataKey: "take.id"] = "\(key.takeID)"
        logger[metadataKey: "device.id"] = "\(key.deviceID)"
        let segmentLength = UInt64(max(segmentSeconds > 0 ? segmentSeconds : 300, 1)) * 1_000_000_000
        worker = OwnedWorker(
            name: "cf-encode", capacity: capacity, whenFull: .refuseNewest,
            state: { [logger] in
                TakeEncoderState(
                    key: key, encoding: encoding, takeStart: takeStart, segmentLength: segmentLength, frameRate: frameRate,
                    catalog: catalog, settings: settings, downstream: downstream, logger: logger,
                    onDropped: onDropped, onEvent: onEvent, onPacket: onPacket, wantsKeyFrame: wantsKeyFrame,
                    subject: subject ?? "take \(key.takeID)")
            },
            handle: { state, input in
                if state.handle(input) { onFinished() }
            },
            finish: { state in state.close() })
    }

    // MARK: TakeFramePath

    /// Encoded packets reach the coordinator but cannot serve its viewers, who want raw
    /// frames: those go on the live path while they are wanted.
    var reachesCoordinator: Bool { false }
    var refusalReason: DropReason { .encoderLate }

    func begin(takeID: String, deviceID: String) { downstream.begin(takeID: takeID, deviceID: deviceID) }

    func submit(takeID: String, deviceID: String, header: Capfleet_V1_FrameHeader, takeDrops: DropTally, pixels: FrameBuffer, count: Int) -> Bool {
        guard !ended.load(ordering: .relaxed) else { return false }
        let taken = worker.offer(.frame(header: header, takeDrops: takeDrops, pixels: pixels, count: count))
        if taken { peak.noted(depth: worker.queued) } else { peak.full(capacity: capacity) }
        return taken
    }

    func submitPreRoll(takeID: String, deviceID: String, frames: [PreRollFrame], takeDrops: DropTally) -> Int {
        guard !ended.load(ordering: .relaxed) else { return frames.count }
        _ = worker.post(.frames(frames, takeDrops: takeDrops))
        return 0
    }

    /// The encoder's queue, or the writer's after it when that one came nearer to filling.
    func queue(takeID: String, deviceID: String) -> TakeQueueFigures? {
        let own = TakeQueueFigures(depth: worker.queued, capacity: capacity, peak: peak.value)
        guard let after = downstream.queue(takeID: takeID, deviceID: deviceID), after.fill > own.fill else { return own }
        return after
    }

    /// The encoder finishes what is queued, hands the last packets on, then ends the part.
    func end(takeID: String, deviceID: String, takeDrops: DropTally, reason: String, withholding: Bool) {
        guard !ended.exchange(true, ordering: .relaxed) else { return }
        _ = worker.post(.end(takeDrops: takeDrops, reason: reason, withholding: withholding))
    }

    /// Posts work for the encoder's thread, in order with the frames (never refused).
    func post(_ input: Input) { _ = worker.post(input) }

    /// How full the encoder's queue is, 0 to 1: the host's pressure counts it.
    var fill: Double { Double(worker.queued) / Double(capacity) }

    /// Ends the thread once what is queued is encoded and handed on.
    func shutdown() async { await worker.stop() }
}

/// The encoder's side of a `TakeEncodingPath`, on its thread only.
final class TakeEncoderState {
    private let key: TakeDeviceKey
    private let encoding: TakeEncoding
    private let takeStart: UInt64
    private let segmentLength: UInt64
    private let frameRate: Double
    private let catalog: EncoderCatalog
    private let settings: TakeEncodingPath.Settings
    private let downstream: any TakeFramePath
    private let logger: Logger
    private let onDropped: @Sendable (DropReason, UInt64) -> Void
    private let onEvent: @Sendable (String) -> Void
    /// Every packet that reached the path, also offered to the live path.
    private let onPacket: (@Sendable (Capfleet_V1_FrameHeader, FrameBuffer, Int) -> Void)?
    /// Asked before every frame: the path wants the next one to be a key frame.
    private let wantsKeyFrame: (@Sendable () -> Bool)?
    /// Who the device's events name: "take ID", or "pre-roll".
    private let subject: String
    /// Other takes' segments (an encoded pre-roll's): a key frame at each slot's first frame.
    private var keySchedules: [String: (start: UInt64, every: UInt64, slot: UInt64?)] = [:]
    private var encoder: VideoEncoder?
    /// The encoder could not be opened for this source: its frames are dropped, said once.
    private var failedSource: VideoEncoder.Source?
    private var nextIndex: Int64 = 0
    /// Every frame handed in, numbered as it arrived, and what of them the encoder lost.
    private var arrivals: UInt64 = 0
    private var losses = EncoderDropOrder()
    /// Frames inside the encoder, by the number they were given: their headers and tallies.
    private var inFlight: [Int64: (header: Capfleet_V1_FrameHeader, takeDrops: DropTally, arrival: UInt64)] = [:]
    /// The segment slot of the last frame encoded: a new slot starts with a key frame.
    private var slot: UInt64?
    /// A packet was lost on the way to the path: what depends on it is left out until the
    /// next key frame, which the next frame is made to be.
    private var awaitingKeyFrame = false
    private var finished = false

    init(
        key: TakeDeviceKey, encoding: TakeEncoding, takeStart: UInt64, segmentLength: UInt64, frameRate: Double, catalog: EncoderCatalog,
        settings: TakeEncodingPath.Settings, downstream: any TakeFramePath, logger: Logger,
        onDropped: @escaping @Sendable (DropReason, UInt64) -> Void, onEvent: @escaping @Sendable (String) -> Void,
        onPacket: (@Sendable (Capfleet_V1_FrameHeader, FrameBuffer, Int) -> Void)?,
        wantsKeyFrame: (@Sendable () -> Bool)? = nil, subject: String
    ) {
        self.wantsKeyFrame = wantsKeyFrame
        self.subject = subject
        self.key = key
        self.encoding = encoding
        self.takeStart = takeStart
        self.segmentLength = segmentLength
        self.frameRate = frameRate
        self.catalog = catalog
        self.settings = settings
        self.downstream = downstream
        self.logger = logger
        self.onDropped = onDropped
        self.onEvent = onEvent
        self.onPacket = onPacket
    }

    /// True once the part has ended here.
    func handle(_ input: TakeEncodingPath.Input) -> Bool {
        guard !finished else { return false }
        switch input {
        case let .frame(header, takeDrops, pixels, count):
            encode(header, takeDrops: takeDrops, pixels: pixels, count: count)
            return false
        case let .frames(frames, takeDrops):
            for frame in frames { encode(frame.header, takeDrops: takeDrops, pixels: frame.pixels, count: frame.count) }
            return false
        case let .end(takeDrops, reason, withholding):
            drain()
            finished = true
            downstream.end(
                takeID: key.takeID, deviceID: key.deviceID, takeDrops: takeDrops.adding(losses.all()), reason: reason,
                withholding: withholding)
            return true
        case let .keyFrames(id, start, every):
            keySchedules[id] = every.map { (start, max($0, 1), nil) }
            return false
        case let .perform(work):
            work()
            return false
        }
    }

    /// The agent stops mid-take: what the encoder holds goes to the path, which finishes its
    /// segment (the part goes on when the coordinator asks again).
    func close() {
        guard !finished else { return }
        drain()
    }

    private func encode(_ header: Capfleet_V1_FrameHeader, takeDrops: DropTally, pixels: FrameBuffer, count: Int) {
        let layout = header.layout
        let arrival = arrivals
        arrivals += 1
        // Compressed camera formats are stored as they come.
        guard !["MJPG", "JPEG", "H264", "HEVC"].contains(layout.pixelFormat) else {
            pass(header, takeDrops: takeDrops, arrival: arrival, bytes: pixels, count: count)
            return
        }
        let source = VideoEncoder.Source(
            pixelFormat: layout.pixelFormat, width: Int(layout.width), height: Int(layout.height),
            bytesPerLine: Int(layout.bytesPerLine), frameRate: frameRate, bitDepth: layout.bitDepth == 0 ? 8 : Int(layout.bitDepth),
            colour: layout.hasColour ? ColourDescription(wire: layout.colour) : nil)
        if encoder?.source != source {
            drain()
            encoder = nil
            guard source != failedSource else {
                lost(.encoderLate, arrival: arrival)
                return
            }
            encoder = open(for: source)
            guard encoder != nil else {
                failedSource = source
                lost(.encoderLate, arrival: arrival)
                return
            }
        }
        guard let encoder else { return }
        let sinceStart = header.fleetTimeNs >= takeStart ? header.fleetTimeNs - takeStart : 0
        let frameSlot = sinceStart / segmentLength
        var forceKey = awaitingKeyFrame || slot.map { $0 != frameSlot } ?? true
        slot = frameSlot
        for (id, schedule) in keySchedules where header.fleetTimeNs >= schedule.start {
            let scheduleSlot = (header.fleetTimeNs - schedule.start) / schedule.every
            if schedule.slot != scheduleSlot { forceKey = true }
            keySchedules[id]?.slot = scheduleSlot
        }
        if wantsKeyFrame?() == true { forceKey = true }
        let index = nextIndex
        nextIndex += 1
        inFlight[index] = (header, takeDrops, arrival)
        do {
            try encoder.encode(pixels.storage, count: count, frameIndex: index, forceKey: forceKey) { packet in deliver(packet, from: encoder) }
        } catch {
            inFlight[index] = nil
            logger.warning("a frame could not be encoded", metadata: ["error": "\(error)"])
            lost(.encoderLate, arrival: arrival)
            awaitingKeyFrame = true
        }
    }

    /// The first encoder of the catalog's that opens for `source`; each one passed over and
    /// a software encoder standing in are said in the device's events.
    private func open(for source: VideoEncoder.Source) -> VideoEncoder? {
        var passedOver: [String] = []
        for choice in catalog.encoders(for: encoding.codec) {
            do throws(EncodingError) {
                let opened = try VideoEncoder(choice: choice, encoding: encoding, source: source, threads: settings.threads, preset: settings.preset)
                var message =
                    "\(subject): encoding \(source.width)x\(source.height) \(source.pixelFormat) as \(encoding.summary) with \(choice)"
                    + (choice.isHardware ? " (hardware)" : " (software, \(settings.threads) thread\(settings.threads == 1 ? "" : "s"))")
                if !passedOver.isEmpty {
                    message += "; fell back from \(passedOver.joined(separator: "; "))"
                } else if !choice.isHardware, encoding.codec.isLossy {
                    message += "; this host has no hardware \(encoding.codec.rawValue) encoder"
                }
                logger.notice("encoder opened", metadata: ["encoder": "\(choice)", "codec": "\(encoding.codec.rawValue)"])
                onEvent(message)
                return opened
            } catch {
                passedOver.append("\(choice): \(error)")
            }
        }
        let reason = passedOver.isEmpty ? "this host has no \(encoding.codec.rawValue) encoder" : passedOver.joined(separator: "; ")
        logger.error("no encoder opens for the take's frames", metadata: ["reason": "\(reason)"])
        onEvent(
            "\(subject): cannot encode \(source.width)x\(source.height) \(source.pixelFormat) as \(encoding.codec.rawValue): \(reason). Its frames are dropped (encoder_late) until the format changes"
        )
        return nil
    }

    private func drain() {
        guard let encoder else { return }
        do {
            try encoder.drain { packet in deliver(packet, from: encoder) }
        } catch {
            logger.warning("the encoder's last packets could not be taken", metadata: ["error": "\(error)"])
        }
        for frame in inFlight.values { lost(.encoderLate, arrival: frame.arrival) }
        inFlight.removeAll()
        self.encoder = nil
        awaitingKeyFrame = false
    }

    private func deliver(_ packet: VideoEncoder.Packet, from encoder: VideoEncoder) {
        guard let (captured, takeDrops, arrival) = inFlight.removeValue(forKey: packet.frameIndex) else { return }
        if awaitingKeyFrame, !packet.isKeyFrame {
            lost(.outOfBuffers, arrival: arrival)
            return
        }
        var header = captured
        header.layout.pixelFormat = encoding.codec.fourCC
        header.layout.bytesPerLine = 0
        // What the stream codes: a 12-bit camera's HEVC is Main 10.
        header.layout.bitDepth = encoder.codedBitDepth == 8 ? 0 : UInt32(encoder.codedBitDepth)
        header.payloadSize = UInt64(packet.bytes.count)
        if packet.isKeyFrame { header.flags |= UInt32(Capfleet_V1_FrameFlag.keyFrame.rawValue) }
        header.encoded = .with {
            $0.codec = encoding.codec.wire
            $0.sourcePixelFormat = captured.layout.pixelFormat
            $0.codecConfig = Data(encoder.codecConfig)
            $0.encoder = encoder.choice.name
            $0.stabilisation = encoder.encoding.stabilisation.wire
        }
        let copy = FrameBuffer(unpooledCapacity: packet.bytes.count)
        if let base = packet.bytes.baseAddress { copy.storage.copyMemory(from: base, byteCount: packet.bytes.count) }
        let carried = takeDrops.adding(losses.carried(by: arrival))
        if downstream.submit(takeID: key.takeID, deviceID: key.deviceID, header: header, takeDrops: carried, pixels: copy, count: packet.bytes.count)
        {
            awaitingKeyFrame = false
            // The same bytes, shared: neither side changes them.
            onPacket?(header, copy, packet.bytes.count)
        } else {
            lost(.outOfBuffers, arrival: arrival)
            awaitingKeyFrame = encoding.codec != .ffv1 || encoding.gopFrames(frameRate: frameRate) > 1
        }
    }

    private func pass(_ header: Capfleet_V1_FrameHeader, takeDrops: DropTally, arrival: UInt64, bytes: FrameBuffer, count: Int) {
        let carried = takeDrops.adding(losses.carried(by: arrival))
        if !downstream.submit(takeID: key.takeID, deviceID: key.deviceID, header: header, takeDrops: carried, pixels: bytes, count: count) {
            lost(.outOfBuffers, arrival: arrival)
        }
    }

    /// A frame lost here: the device's counters hear it now, the take's drops with the
    /// packets after it (capture's tally, made before the encoder got to the frame, cannot).
    private func lost(_ reason: DropReason, arrival: UInt64) {
        losses.lost(reason, ordinal: arrival)
        onDropped(reason, 1)
    }
}
