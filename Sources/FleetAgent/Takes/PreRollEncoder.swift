import FleetCapture
import FleetCore
import FleetEncoding
import FleetProtocol
import Logging
import Synchronization

/// A camera's encoded pre-roll (recordings.md, "Encoded pre-roll"): one encoder of the host's
/// that runs as long as the pre-roll does, fed each frame as a take would record it, with key
/// frames on every whole second of fleet time. Its packets go into the camera's pre-roll ring,
/// in groups from key frames, and on to the takes of the camera in the same encoding: each
/// such take taps the stream (`PreRollTap`) instead of encoding the frames again, so its part
/// is the kept packets from its start, then every packet after, with no seam to lose frames at.
final class PreRollEncoder: Sendable {
    /// The name its encoder's path goes by, where a take's id would be.
    static let pathName = "pre-roll"

    let encoding: TakeEncoding
    private let path: TakeEncodingPath
    private let packets: PreRollPackets
    /// The path, for the packets' side to reach (cleared once it ends, so neither holds the other).
    private let encoderPath: EncoderPathBox

    init(
        encoding: TakeEncoding, deviceID: String, frameRate: Double, catalog: EncoderCatalog, settings: TakeEncodingPath.Settings,
        keeper: PreRollKeeper<PreRollFrame>, logger: Logger, onDropped: @escaping @Sendable (DropReason, UInt64) -> Void,
        onEvent: @escaping @Sendable (String) -> Void
    ) {
        self.encoding = encoding
        // A finished take's key frames are no longer made (told on the encoder's thread).
        let encoderPath = EncoderPathBox()
        self.encoderPath = encoderPath
        let packets = PreRollPackets(keeper: keeper) { takeID in
            encoderPath.path.withLock { $0 }?.post(.keyFrames(id: takeID, start: 0, every: nil))
        }
        self.packets = packets
        // Half a second of frames may wait for the encoder, as for a take's.
        let capacity = max(4, Int((frameRate / 2).rounded(.up)))
        path = TakeEncodingPath(
            key: TakeDeviceKey(takeID: Self.pathName, deviceID: deviceID), encoding: encoding, takeStart: 0,
            segmentSeconds: Int(PreRollSettings.keyFrameNanoseconds / 1_000_000_000), frameRate: frameRate, catalog: catalog,
            settings: settings, downstream: packets, capacity: capacity, logger: logger, onDropped: onDropped, onEvent: onEvent,
            wantsKeyFrame: { [packets] in packets.takeKeyFrameRequest() }, subject: "pre-roll", onFinished: {})
        encoderPath.path.withLock { $0 = path }
    }

    /// A frame as a take would record it, from the capture thread; false when the encoder is
    /// too far behind to take it (it is `encoder_late`, for the pre-roll and its takes).
    func offer(header: Capfleet_V1_FrameHeader, pixels: FrameBuffer, count: Int) -> Bool {
        path.submit(takeID: Self.pathName, deviceID: header.deviceID, header: header, takeDrops: DropTally(), pixels: pixels, count: count)
    }

    /// The path a take of this camera in this encoding records through: the same one when
    /// the take is said again (a registration), attached once its part has begun, so that
    /// the part gets what was kept from `start` on and every packet after.
    func tap(
        takeID: String, deviceID: String, start: UInt64, segmentSeconds: Int, downstream: any TakeFramePath,
        onPacket: (@Sendable (Capfleet_V1_FrameHeader, FrameBuffer, Int) -> Void)?
    ) -> PreRollTap {
        let made = packets.taps.withLock { taps -> PreRollTap? in
            if taps[takeID] != nil { return nil }
            let tap = PreRollTap(takeID: takeID, deviceID: deviceID, start: start, encoder: self, downstream: downstream, onPacket: onPacket)
            taps[takeID] = tap
            return tap
        }
        guard let tap = made else { return packets.taps.withLock { $0[takeID]! } }
        let every = UInt64(max(segmentSeconds > 0 ? segmentSeconds : 300, 1)) * 1_000_000_000
        path.post(.keyFrames(id: takeID, start: start, every: every))
        return tap
    }

    /// The tap's part has begun on its path: the kept packets from its start go to it.
    fileprivate func attach(_ tap: PreRollTap) {
        path.post(.perform { [packets] in packets.attach(tap) })
    }

    /// Whether a take taps the stream now: the encoder must run while one does.
    var isTapped: Bool { packets.taps.withLock { !$0.isEmpty } }

    /// The pre-roll no longer keeps this encoder's packets (turned off, raw, another
    /// encoding): it runs on only for the takes tapping it, and ends with the last.
    func retire() {
        packets.keeping.store(false, ordering: .relaxed)
        packets.retired.store(true, ordering: .relaxed)
        path.post(.perform { [self] in endIfIdle() })
    }

    /// A tap's part ends after the frames it was given: once their packets are out.
    fileprivate func ending(_ tap: PreRollTap) {
        path.post(
            .perform { [self] in
                packets.ending(tap)
                endIfIdle()
            })
    }

    fileprivate func feed(header: Capfleet_V1_FrameHeader, pixels: FrameBuffer, count: Int) -> Bool {
        offer(header: header, pixels: pixels, count: count)
    }

    /// On the encoder's thread: a retired encoder with no take left stops.
    private func endIfIdle() {
        guard packets.retired.load(ordering: .relaxed), packets.taps.withLock({ $0.isEmpty }) else { return }
        path.end(takeID: Self.pathName, deviceID: "", takeDrops: DropTally(), reason: "pre-roll retired", withholding: false)
        encoderPath.path.withLock { $0 = nil }
    }

    var queueFill: Double { path.fill }

    /// Ends the thread once what is queued is encoded and handed on (the agent stops).
    func shutdown() async {
        await path.shutdown()
        encoderPath.path.withLock { $0 = nil }
    }
}

/// Where the pre-roll encoder's packets go, on its thread: into the ring (while the pre-roll
/// keeps them) and to every take tapping the stream.
final class PreRollPackets: TakeFramePath, Sendable {
    let keeper: PreRollKeeper<PreRollFrame>
    /// The takes tapping the stream, by take.
    let taps = Mutex<[String: PreRollTap]>([:])
    let keeping = Atomic<Bool>(true)
    /// Told, on the encoder's thread, of each take whose part has ended.
    private let onFinished: @Sendable (String) -> Void
    let retired = Atomic<Bool>(false)
    /// A tap lost a packet: the next frame is made a key frame, so it is not long without.
    private let keyFrameWanted = Atomic<Bool>(false)
    /// The newest packet's capture time, on the encoder's thread.
    private let newest = Mutex<UInt64?>(nil)

    init(keeper: PreRollKeeper<PreRollFrame>, onFinished: @escaping @Sendable (String) -> Void) {
        self.keeper = keeper
        self.onFinished = onFinished
    }

    var reachesCoordinator: Bool { false }
    func begin(takeID: String, deviceID: String) {}

    func takeKeyFrameRequest() -> Bool { keyFrameWanted.exchange(false, ordering: .relaxed) }

    /// On the encoder's thread: a new tap gets what was kept from its start.
    func attach(_ tap: PreRollTap) {
        tap.handOver(keeper.keptIncludingDisk(from: tap.start))
        tap.attached = true
    }

    /// On the encoder's thread: a tap whose last frame's packet is already out ends now.
    func ending(_ tap: PreRollTap) {
        if let last = tap.lastFrame, let newest = newest.withLock({ $0 }), newest < last { return }
        finish(tap)
    }

    func submit(takeID: String, deviceID: String, header: Capfleet_V1_FrameHeader, takeDrops: DropTally, pixels: FrameBuffer, count: Int) -> Bool {
        newest.withLock { $0 = header.fleetTimeNs }
        if keeping.load(ordering: .relaxed) { keeper.keepPacket(header: header, pixels: pixels, count: count) }
        for tap in taps.withLock({ Array($0.values) }) where tap.attached {
            // A part whose last frame is out ends before a packet after it.
            if let last = tap.endsAfter, header.fleetTimeNs > last {
                finish(tap)
                continue
            }
            if !deliver(header, pixels, count, to: tap, drops: takeDrops) { keyFrameWanted.store(true, ordering: .relaxed) }
            if let last = tap.endsAfter, header.fleetTimeNs >= last { finish(tap) }
        }
        return true
    }

    /// The encoder stopped: every take still tapping ends after what it got.
    func end(takeID: String, deviceID: String, takeDrops: DropTally, reason: String, withholding: Bool) {
        for tap in taps.withLock({ Array($0.values) }) where tap.endsAfter != nil { finish(tap) }
    }

    private func deliver(_ header: Capfleet_V1_FrameHeader, _ pixels: FrameBuffer, _ count: Int, to tap: PreRollTap, drops: DropTally) -> Bool {
        guard header.fleetTimeNs >= tap.start else { return true }
        return tap.forward(header: header, encoderDrops: drops, pixels: pixels, count: count)
    }

    private func finish(_ tap: PreRollTap) {
        guard taps.withLock({ $0.removeValue(forKey: tap.takeID) }) != nil else { return }
        tap.finish()
        onFinished(tap.takeID)
    }
}

/// A take's part recorded from its camera's encoded pre-roll (PreRollEncoder): the capture
/// thread's frames of the take feed the one encoder, and the encoder's packets from the
/// take's start reach the part's path (`AgentTakeStore` or `RecordSender`).
final class PreRollTap: TakeFramePath, Sendable {
    let takeID: String
    let deviceID: String
    let start: UInt64
    /// Held while the take taps it (the encoder holds its taps until they end).
    private let encoder: PreRollEncoder
    private let downstream: any TakeFramePath
    private let onPacket: (@Sendable (Capfleet_V1_FrameHeader, FrameBuffer, Int) -> Void)?
    private struct State {
        /// The take's drops as capture last counted them.
        var captureDrops = DropTally()
        /// The encoder's losses when the tap attached, and since.
        var encoderDropsAtStart: DropTally?
        var lastFrame: UInt64?
        var end: (takeDrops: DropTally, reason: String, withholding: Bool)?
        /// A packet was refused: the part waits for a key frame.
        var awaitingKeyFrame = false
        var begun = false
        var attached = false
        var finished = false
    }
    private let state = Mutex(State())

    fileprivate init(
        takeID: String, deviceID: String, start: UInt64, encoder: PreRollEncoder, downstream: any TakeFramePath,
        onPacket: (@Sendable (Capfleet_V1_FrameHeader, FrameBuffer, Int) -> Void)?
    ) {
        self.takeID = takeID
        self.deviceID = deviceID
        self.start = start
        self.encoder = encoder
        self.downstream = downstream
        self.onPacket = onPacket
    }

    var reachesCoordinator: Bool { false }
    var refusalReason: DropReason { .encoderLate }
    /// The take's frames reach the pre-roll encoder through this path: the camera must not
    /// hand them to it a second time.
    var feedsPreRoll: Bool { true }

    var lastFrame: UInt64? { state.withLock { $0.lastFrame } }
    /// Its part's path has heard the end.
    var isFinished: Bool { state.withLock { $0.finished } }
    /// Set on the encoder's thread once the kept packets from its start were handed on.
    var attached: Bool {
        get { state.withLock { $0.attached } }
        set { state.withLock { $0.attached = newValue } }
    }
    /// Set once the part ends: its last frame's capture time (its start when it had none).
    var endsAfter: UInt64? { state.withLock { $0.end == nil ? nil : ($0.lastFrame ?? start) } }

    /// The part begins on its path first: the path takes nothing of a part it has not begun.
    func begin(takeID: String, deviceID: String) {
        downstream.begin(takeID: takeID, deviceID: deviceID)
        let first = state.withLock { state -> Bool in
            defer { state.begun = true }
            return !state.begun
        }
        if first { encoder.attach(self) }
    }

    func submit(takeID: String, deviceID: String, header: Capfleet_V1_FrameHeader, takeDrops: DropTally, pixels: FrameBuffer, count: Int) -> Bool {
        let open = state.withLock { state -> Bool in
            guard state.end == nil else { return false }
            state.captureDrops = takeDrops
            state.lastFrame = header.fleetTimeNs
            return true
        }
        return open && encoder.feed(header: header, pixels: pixels, count: count)
    }

    /// Kept frames from the start are in the stream already: nothing to hand over.
    func submitPreRoll(takeID: String, deviceID: String, frames: [PreRollFrame], takeDrops: DropTally) -> Int { 0 }

    func end(takeID: String, deviceID: String, takeDrops: DropTally, reason: String, withholding: Bool) {
        let first = state.withLock { state -> Bool in
            guard state.end == nil else { return false }
            state.end = (takeDrops, reason, withholding)
            return true
        }
        if first { encoder.ending(self) }
    }

    func queue(takeID: String, deviceID: String) -> TakeQueueFigures? { downstream.queue(takeID: takeID, deviceID: deviceID) }

    /// On the encoder's thread, as it attaches: the packets kept from its start, in one go,
    /// which the part's path takes whatever its queue holds (their memory is already spent).
    fileprivate func handOver(_ kept: [PreRollFrame]) {
        guard !kept.isEmpty else { return }
        let recording = UInt32(Capfleet_V1_FrameFlag.recording.rawValue)
        let frames = kept.map { frame -> PreRollFrame in
            var frame = frame
            frame.header.flags |= recording
            return frame
        }
        let refused = downstream.submitPreRoll(takeID: takeID, deviceID: deviceID, frames: frames, takeDrops: DropTally())
        // What a refused packet leaves out cannot be decoded: the part goes on at a key frame.
        state.withLock { $0.awaitingKeyFrame = refused > 0 }
        if refused == 0, let onPacket { for frame in frames { onPacket(frame.header, frame.pixels, frame.count) } }
    }

    /// On the encoder's thread: a packet of the take's, with the encoder's losses so far.
    fileprivate func forward(header: Capfleet_V1_FrameHeader, encoderDrops: DropTally, pixels: FrameBuffer, count: Int) -> Bool {
        let (drops, skip) = state.withLock { state -> (DropTally, Bool) in
            let atStart = state.encoderDropsAtStart ?? encoderDrops
            state.encoderDropsAtStart = atStart
            if state.awaitingKeyFrame, !header.isKeyFrame { return (state.captureDrops, true) }
            return (state.captureDrops.adding(encoderDrops.since(atStart)), false)
        }
        if skip { return false }
        var header = header
        header.flags |= UInt32(Capfleet_V1_FrameFlag.recording.rawValue)
        let taken = downstream.submit(takeID: takeID, deviceID: deviceID, header: header, takeDrops: drops, pixels: pixels, count: count)
        state.withLock { $0.awaitingKeyFrame = !taken }
        if taken { onPacket?(header, pixels, count) }
        return taken
    }

    /// On the encoder's thread, once: the part's path hears its end.
    fileprivate func finish() {
        guard
            let end = state.withLock({ state -> (takeDrops: DropTally, reason: String, withholding: Bool)? in
                guard !state.finished else { return nil }
                state.finished = true
                return state.end
            })
        else { return }
        downstream.end(takeID: takeID, deviceID: deviceID, takeDrops: end.takeDrops, reason: end.reason, withholding: end.withholding)
    }
}

/// The pre-roll's encoder path, for its packets' side to reach.
private final class EncoderPathBox: Sendable {
    let path = Mutex<TakeEncodingPath?>(nil)
}
