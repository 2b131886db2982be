import FleetAudio
import FleetCapture
import FleetCore
import FleetEncoding
import FleetProtocol
import FleetSystem
import Foundation
import Logging
import Synchronization

/// Where a microphone's blocks come from: the synthetic tone or an ALSA capture device. Runs
/// on the microphone's own thread until `running` says stop, handing each block to `deliver`.
protocol MicrophoneSource: Sendable {
    var format: AudioFormat { get }
    var descriptor: Capfleet_V1_DeviceDescriptor { get }
    var isSynthetic: Bool { get }
    /// Captures until `running()` is false; throws when the device fails for good. `clock`
    /// is the agent's (the synthetic tone places its clicks by it).
    func capture(clock: ClockSync, running: () -> Bool, deliver: (inout [Int16], MicrophoneBlock) -> Void) throws
}

/// One block as its source read it: frames, its first frame's CLOCK_MONOTONIC capture time and
/// how that is known, and whether samples were lost just before it.
struct MicrophoneBlock {
    var frames: Int
    var firstFrameMonotonicNs: UInt64
    var timestampSource: Capfleet_V1_AudioTimestampSource
    var afterGap = false
}

/// What the microphone's blocks go to: the clock that puts them in fleet time and the live
/// path (frames.md, "Microphones on the live path").
struct MicrophoneRoute: Sendable {
    var nodeID: String
    var clock: ClockSync
    var publish: @Sendable (FrameBuffer, Int, Capfleet_V1_FrameHeader) -> Void
}

/// One microphone of the agent (microphones.md): its source on a thread of its own; consent,
/// meters, the audio clock's fit and the live path here, for every kind of source alike.
/// Without consent its samples are silence before anything measures or sends them.
final class Microphone: Sendable {
    let deviceID: String
    let source: any MicrophoneSource
    let liveFlow = LiveFlowGate()
    let statistics: DeviceStatistics
    private let logger: Logger
    private let onRealSamples: @Sendable (String, Bool) -> Void

    private struct Shared {
        var meter: AudioLevelMeter
        var fit: AudioClockFit
        /// Consent and the take in progress (MicrophoneTakeState decides; this performs).
        var takes: MicrophoneTakeState
        var recordingPath: (any TakeFramePath)?
        var chunker: AudioChunker
        var consent: ConsentState { takes.consent }
        var framesCaptured: UInt64 = 0
        /// The next block's first frame, counted from the start of capture (gaps included).
        var nextFrame: UInt64 = 0
        var sequence: UInt64 = 0
        var timestampSource: Capfleet_V1_AudioTimestampSource = .unspecified
        var failure: String?
        /// The processing asked for (microphones.md, "Processing"); the thread makes its chain
        /// anew whenever the generation moves.
        var processing = AudioProcessingSettings.off
        var processingGeneration: UInt64 = 0
    }

    private final class Box: Sendable {
        let shared: Mutex<Shared>
        let running = Atomic<Bool>(false)
        /// Its last seconds of 10 ms blocks, for takes that start in the past (recordings.md, "Pre-roll").
        let preRoll = PreRollKeeper<KeptChunk>()
        init(_ shared: Shared) { self.shared = Mutex(shared) }
    }

    private let box: Box
    private let thread: OwnedThread

    init(
        source: any MicrophoneSource, consent: ConsentState, logger: Logger,
        onRealSamples: @escaping @Sendable (String, Bool) -> Void
    ) {
        deviceID = source.descriptor.deviceID
        self.source = source
        self.logger = logger
        self.onRealSamples = onRealSamples
        let format = source.format
        box = Box(
            Shared(
                meter: AudioLevelMeter(channels: format.channels, windowFrames: format.sampleRate),
                fit: AudioClockFit(sampleRate: format.sampleRate), takes: MicrophoneTakeState(consent: consent),
                chunker: AudioChunker(channels: format.channels, chunkFrames: Self.chunkFrames(format))))
        statistics = DeviceStatistics(deviceID: deviceID, outOfBuffers: { 0 })
        thread = OwnedThread(name: "cf-mic")
    }

    var descriptor: Capfleet_V1_DeviceDescriptor { source.descriptor }

    var isAllowed: Bool { box.shared.withLock { $0.consent.allowsRealFrames } }

    /// A take's FLAC frames hold 10 ms each.
    static func chunkFrames(_ format: AudioFormat) -> Int { max(format.sampleRate / 100, 1) }

    /// Enforced from the next block on; withdrawn mid-take, it ends the part at once.
    func setConsent(_ consent: ConsentState) {
        let statistics = statistics
        let (was, now, actions, path) = box.shared.withLock { state in
            let was = state.consent.allowsRealFrames
            let actions = state.takes.consentChanged(to: consent, deviceDrops: statistics.drops)
            return (was, consent.allowsRealFrames, actions, state.recordingPath)
        }
        // What was heard before a denial never reaches a take.
        if !now { box.preRoll.forget() }
        perform(actions, on: path)
        if was != now, box.running.load(ordering: .relaxed) { onRealSamples(deviceID, now) }
    }

    // MARK: Processing (microphones.md, "Processing")

    /// Checks the settings against the microphone's format (speexdsp makes a preprocessor for
    /// it) and applies them from the next block on.
    func setProcessing(_ settings: AudioProcessingSettings) throws(AudioProcessingError) {
        let format = source.format
        _ = try AudioProcessor(settings: settings, sampleRate: format.sampleRate, channels: format.channels)
        box.shared.withLock { state in
            state.processing = settings
            state.processingGeneration &+= 1
        }
    }

    var processing: AudioProcessingSettings { box.shared.withLock { $0.processing } }

    // MARK: Pre-roll (recordings.md, "Pre-roll")

    /// How much of its recent sound to keep, from the next block on; what no longer fits goes at once.
    func setPreRoll(_ settings: PreRollSettings) { box.preRoll.change(to: settings) }

    /// The host's pressure changed: a serious or critical host keeps less.
    func pressureChanged(to level: PressureLevel) { box.preRoll.pressureChanged(to: level) }

    /// What it keeps now; nil while off.
    var preRollFigures: Capfleet_V1_PreRoll? { box.preRoll.figures }

    // MARK: Takes (microphones.md, "In takes")

    /// The take's part begins at `start` (fleet ns); its FLAC frames go to `recordingPath`.
    func beginTake(takeID: String, start: UInt64, recordingPath: any TakeFramePath) {
        let statistics = statistics
        let (isNew, actions) = box.shared.withLock { state in
            state.recordingPath = recordingPath
            let isNew = state.takes.take?.takeID != takeID
            return (isNew, state.takes.takeBegan(takeID: takeID, startFleet: start, deviceDrops: statistics.drops))
        }
        // Said again at every registration: what was kept is handed over once.
        if isNew { box.preRoll.takeBegan(takeID: takeID, start: start) }
        perform(actions, on: recordingPath)
    }

    func stopTake(takeID: String, stop: UInt64?, nowFleet: UInt64?, cause: TakeStopCause) {
        let statistics = statistics
        let (actions, path) = box.shared.withLock { state in
            (
                state.takes.takeStopAsked(takeID: takeID, stopFleet: stop, nowFleet: nowFleet, cause: cause, deviceDrops: statistics.drops),
                state.recordingPath
            )
        }
        perform(actions, on: path)
    }

    /// A stop instant that passed with no block after it (the microphone stopped capturing).
    func endTakeIfDue(nowFleet: UInt64) {
        let statistics = statistics
        let (actions, path) = box.shared.withLock { state in
            (state.takes.takeStopDue(nowFleet: nowFleet, deviceDrops: statistics.drops), state.recordingPath)
        }
        perform(actions, on: path)
    }

    var isRecording: Bool { box.shared.withLock { $0.takes.take != nil } }

    private func perform(_ actions: [MicrophoneTakeState.Action], on path: (any TakeFramePath)?) {
        Self.perform(actions, on: path, deviceID: deviceID)
    }

    private static func perform(_ actions: [MicrophoneTakeState.Action], on path: (any TakeFramePath)?, deviceID: String) {
        for action in actions {
            switch action {
            case let .beginTake(takeID): path?.begin(takeID: takeID, deviceID: deviceID)
            case let .endTake(end):
                path?.end(takeID: end.takeID, deviceID: deviceID, takeDrops: end.drops, reason: end.reason, withholding: end.withholding)
            }
        }
    }

    var counters: Capfleet_V1_DeviceCounters {
        let statistics = statistics
        return box.shared.withLock { state in
            .with {
                $0.deviceID = deviceID
                $0.streaming = box.running.load(ordering: .relaxed) && state.failure == nil
                $0.realFrames = $0.streaming && state.consent.allowsRealFrames
                $0.audioLevels = state.meter.levels.map(\.wire)
                $0.audioFramesCaptured = state.framesCaptured
                $0.framesCaptured = state.sequence
                $0.framesSent = statistics.framesSent.load(ordering: .relaxed)
                $0.bytesSent = statistics.bytesSent.load(ordering: .relaxed)
                $0.drops = statistics.drops.wire
                $0.liveFlow = liveFlow.isOpen()
                $0.audioClock = .with { clock in
                    clock.timestampSource = state.timestampSource
                    clock.rateMeasured = state.fit.ratePPM != nil
                    clock.ratePpm = state.fit.ratePPM ?? 0
                    clock.jitterNs = state.fit.jitterNanoseconds
                    clock.fittedSeconds = state.fit.fittedSeconds
                    clock.restarts = state.fit.restarts
                }
                if let figures = box.preRoll.figures { $0.preRoll = figures }
            }
        }
    }

    /// Starts capturing on the microphone's thread; a source that fails is logged and stays stopped.
    func start(route: MicrophoneRoute) {
        guard !box.running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let (box, source, logger, deviceID, liveFlow, statistics) = (box, source, logger, deviceID, liveFlow, statistics)
        if isAllowed { onRealSamples(deviceID, true) }
        thread.start {
            // The take's encoder lives on this thread, made at the first block a take keeps, as
            // does the processing chain, made anew when its settings change.
            var encoder: FlacEncoder?
            var processing = ProcessingChain()
            var live = LiveSound()
            do {
                try source.capture(clock: route.clock, running: { box.running.load(ordering: .relaxed) }) { samples, block in
                    Self.take(
                        &samples, block, box: box, source: source, route: route, liveFlow: liveFlow, statistics: statistics, deviceID: deviceID,
                        encoder: &encoder, processing: &processing, live: &live, logger: logger)
                }
            } catch {
                logger.error("microphone stopped", metadata: ["device.id": "\(deviceID)", "error": "\(error)"])
                box.shared.withLock { $0.failure = "\(error)" }
            }
        }
    }

    func stop() {
        guard box.running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        thread.joinBlocking()
        if isAllowed { onRealSamples(deviceID, false) }
    }

    /// The microphone thread's processing chain and the settings generation it was made for.
    private struct ProcessingChain {
        var processor: AudioProcessor?
        var generation: UInt64 = 0
        var settings = AudioProcessingSettings.off
        var delayFrames: Int { processor?.delayFrames ?? 0 }

        /// Makes the chain anew when the settings moved on; a chain that cannot be made (the
        /// settings were checked when set, so only a failing library) leaves the sound as captured.
        mutating func follow(
            _ wanted: AudioProcessingSettings, generation wantedGeneration: UInt64, format: AudioFormat, logger: Logger, deviceID: String
        ) {
            guard wantedGeneration != generation else { return }
            generation = wantedGeneration
            settings = wanted
            guard wanted.isOn else {
                processor = nil
                return
            }
            do {
                processor = try AudioProcessor(settings: wanted, sampleRate: format.sampleRate, channels: format.channels)
            } catch {
                processor = nil
                settings = .off
                logger.error("cannot process the microphone's sound", metadata: ["device.id": "\(deviceID)", "error": "\(error)"])
            }
        }
    }

    /// A 10 ms block a take keeps, taken out of the lock to be encoded and sent (or kept for
    /// the pre-roll, its take not known yet).
    private struct KeptChunk: Sendable {
        var samples: [Int16]
        var firstFrame: UInt64
        var monotonic: UInt64
        var stamp: (fleet: UInt64, uncertainty: UInt64)
        var takeID: String
        var takeDrops: DropTally
        var processing: AudioProcessingSettings
        var delayFrames: Int
        /// Kept by the pre-roll and handed over, not captured just now.
        var fromPreRoll = false
    }

    /// One block, on the microphone's thread: silenced without consent, processed, metered,
    /// placed on the fitted audio clock (less the processing's delay), and sent on the live
    /// path while someone listens and to the take's part while one records it.

    private static func take(
        _ samples: inout [Int16], _ block: MicrophoneBlock, box: Box, source: any MicrophoneSource, route: MicrophoneRoute,
        liveFlow: LiveFlowGate, statistics: DeviceStatistics, deviceID: String, encoder: inout FlacEncoder?,
        processing chain: inout ProcessingChain, live: inout LiveSound, logger: Logger
    ) {
        let format = source.format
        let count = block.frames * format.channels
        var kept: [KeptChunk] = []
        var actions: [MicrophoneTakeState.Action] = []
        var path: (any TakeFramePath)?
        let (allowed, consent, firstFrame, _, smoothed, jitter) = box.shared.withLock { state in
            if block.afterGap {
                // The frames lost are those the gap's time held: the count keeps pace with time.
                if let expected = state.fit.time(ofFrame: state.nextFrame), block.firstFrameMonotonicNs > expected {
                    let lost = Double(block.firstFrameMonotonicNs - expected) * Double(format.sampleRate) / 1e9
                    state.nextFrame += UInt64(lost.rounded())
                }
                state.fit.restart()
                statistics.discontinuity.add(1, ordering: .relaxed)
            }
            let first = state.nextFrame
            state.fit.add(frame: first, timeNs: block.firstFrameMonotonicNs)
            state.timestampSource = block.timestampSource
            if !state.consent.allowsRealFrames {
                for index in 0..<count { samples[index] = 0 }
            }
            // Processed after the silencing: what waits in the chain's frame never held sound
            // captured without consent.
            chain.follow(state.processing, generation: state.processingGeneration, format: format, logger: logger, deviceID: deviceID)
            chain.processor?.process(&samples, frames: block.frames)
            samples.withUnsafeBufferPointer { state.meter.add(UnsafeBufferPointer(rebasing: $0[0..<count])) }
            state.framesCaptured += UInt64(block.frames)
            state.nextFrame += UInt64(block.frames)
            state.sequence += 1
            // The take's 10 ms blocks: each placed on the fitted clock, kept or not by the take.
            path = state.recordingPath
            let fit = state.fit
            let jitter = state.fit.jitterNanoseconds
            // What leaves the chain lags what entered it: frame n out was frame n − delay in.
            let delay = UInt64(chain.delayFrames)
            let (settings, delayFrames) = (chain.settings, chain.delayFrames)
            // Out of the state while it cuts: the cutting decides with the rest of the state.
            var chunker = state.chunker
            defer { state.chunker = chunker }
            samples.withUnsafeBufferPointer { buffer in
                chunker.add(buffer, frames: block.frames, first: first) { chunkFirst, chunk in
                    let monotonic = fit.time(ofFrame: chunkFirst &- delay) ?? block.firstFrameMonotonicNs
                    let stamp = route.clock.stamp(captureMonotonic: monotonic)
                    let decision = state.takes.blockCaptured(fleetTime: stamp?.fleet, deviceDrops: statistics.drops)
                    actions += decision.actions
                    // Copied only for a take or the pre-roll: off, nothing is kept or spent.
                    let keeping = box.preRoll.isOn
                    guard let stamp, decision.recordedFor != nil || keeping else { return }
                    let made = KeptChunk(
                        samples: Array(chunk), firstFrame: chunkFirst, monotonic: monotonic, stamp: (stamp.fleet, stamp.uncertainty &+ jitter),
                        takeID: "", takeDrops: DropTally(), processing: settings, delayFrames: delayFrames)
                    if let take = decision.recordedFor {
                        // A take that starts in the past records what was kept since its start first.
                        let earlier = keeping ? box.preRoll.handOver(takeID: take.takeID, before: stamp.fleet) ?? [] : []
                        for (index, var part) in (earlier + [made]).enumerated() {
                            part.takeID = take.takeID
                            part.takeDrops = take.drops
                            part.fromPreRoll = index < earlier.count
                            kept.append(part)
                        }
                    }
                    if keeping { box.preRoll.keep(fleetTime: stamp.fleet, bytes: made.samples.count * MemoryLayout<Int16>.size, payload: made) }
                }
            }
            return (
                state.consent.allowsRealFrames, state.consent, first, state.sequence,
                state.fit.time(ofFrame: first &- delay) ?? block.firstFrameMonotonicNs, state.fit.jitterNanoseconds
            )
        }
        perform(actions, on: path, deviceID: deviceID)
        if let path, !kept.isEmpty {
            // The pre-roll handed over goes as one batch the path takes whatever its queue
            // holds (its memory is spent already), as a camera's does; live blocks one by one.
            let earlier = kept.prefix { $0.fromPreRoll }
            if let first = earlier.first {
                let packets = earlier.compactMap { chunk in
                    packet(
                        for: chunk, encoder: &encoder, source: source, route: route, allowed: allowed, consent: consent, statistics: statistics,
                        deviceID: deviceID, timestampSource: block.timestampSource, logger: logger)
                }
                let refused =
                    earlier.count - packets.count
                    + path.submitPreRoll(takeID: first.takeID, deviceID: deviceID, frames: packets, takeDrops: first.takeDrops)
                if refused > 0 { box.shared.withLock { state in for _ in 0..<refused { state.takes.handoffDropped(takeID: first.takeID) } } }
            }
            for chunk in kept.dropFirst(earlier.count) {
                let taken =
                    packet(
                        for: chunk, encoder: &encoder, source: source, route: route, allowed: allowed, consent: consent, statistics: statistics,
                        deviceID: deviceID, timestampSource: block.timestampSource, logger: logger
                    ).map {
                        path.submit(
                            takeID: chunk.takeID, deviceID: deviceID, header: $0.header, takeDrops: chunk.takeDrops, pixels: $0.pixels,
                            count: $0.count)
                    } ?? false
                if !taken { box.shared.withLock { $0.takes.handoffDropped(takeID: chunk.takeID) } }
            }
        }
        guard liveFlow.isOpen() else {
            live.discard()
            return
        }
        // Blocks go live 50 ms at a time, consecutive frames of one consent state each.
        if live.frames > 0, live.firstFrame &+ UInt64(live.frames) != firstFrame || live.allowed != allowed {
            publishLive(
                &live, format: format, block: block, chain: chain, route: route, source: source, consent: consent, statistics: statistics,
                deviceID: deviceID, jitter: jitter)
        }
        live.add(samples[0..<count], frames: block.frames, firstFrame: firstFrame, monotonic: smoothed, allowed: allowed)
        guard live.frames >= max(format.sampleRate / 20, 1) else { return }
        publishLive(
            &live, format: format, block: block, chain: chain, route: route, source: source, consent: consent, statistics: statistics,
            deviceID: deviceID, jitter: jitter)
    }

    /// Sound waiting to go on the live path (frames.md, "Microphones on the live path"): 50 ms
    /// a message rather than one per 10 ms block, so a listener's two-message queue at the
    /// coordinator holds 100 ms of sound, not 20, and a moment's stall loses none of it.
    struct LiveSound {
        var samples: [Int16] = []
        var frames = 0
        var firstFrame: UInt64 = 0
        var monotonic: UInt64 = 0
        var allowed = false
        /// Messages published, numbered from 1: their sequence.
        var published: UInt64 = 0

        mutating func add(_ block: ArraySlice<Int16>, frames added: Int, firstFrame first: UInt64, monotonic time: UInt64, allowed isAllowed: Bool) {
            if frames == 0 {
                firstFrame = first
                monotonic = time
                allowed = isAllowed
            }
            samples.append(contentsOf: block)
            frames += added
        }

        mutating func discard() {
            samples.removeAll(keepingCapacity: true)
            frames = 0
        }
    }

    /// Sends the waiting sound as one live message, timed by its first frame.
    private static func publishLive(
        _ live: inout LiveSound, format: AudioFormat, block: MicrophoneBlock, chain: ProcessingChain, route: MicrophoneRoute,
        source: any MicrophoneSource, consent: ConsentState, statistics: DeviceStatistics, deviceID: String, jitter: UInt64
    ) {
        defer { live.discard() }
        let allowed = live.allowed, smoothed = live.monotonic
        let bytes = live.samples.count * 2
        guard bytes > 0 else { return }
        let buffer = FrameBuffer(unpooledCapacity: bytes)
        live.samples.withUnsafeBytes { buffer.storage.copyMemory(from: $0.baseAddress!, byteCount: bytes) }
        live.published += 1
        var header = Capfleet_V1_FrameHeader()
        header.protocolVersion = WireDefaults.protocolMajor
        header.nodeID = route.nodeID
        header.deviceID = deviceID
        header.sequence = live.published
        header.captureMonotonicNs = route.clock.nodeClock.local(fromMonotonic: smoothed)
        header.payloadSize = UInt64(bytes)
        header.consent = consent.wire
        header.drops = statistics.drops.wire
        var flags: UInt32 = source.isSynthetic ? UInt32(Capfleet_V1_FrameFlag.synthetic.rawValue) : 0
        if !allowed { flags |= UInt32(Capfleet_V1_FrameFlag.black.rawValue) }
        if let stamp = route.clock.stamp(captureMonotonic: smoothed) {
            header.fleetTimeNs = stamp.fleet
            header.fleetTimeUncertaintyNs = stamp.uncertainty &+ jitter
            flags |= UInt32(Capfleet_V1_FrameFlag.fleetTimeValid.rawValue)
        }
        header.flags = flags
        header.audio = .with {
            $0.format = AudioFormat(sampleRate: format.sampleRate, channels: format.channels, sampleFormat: .s16le).wire
            $0.frames = UInt32(live.frames)
            $0.timestampSource = block.timestampSource
            $0.firstFrame = live.firstFrame
            if chain.settings.isOn {
                $0.processing = chain.settings.wire
                $0.processingDelayFrames = UInt32(chain.delayFrames)
            }
        }
        route.publish(buffer, bytes, header)
    }

    /// One 10 ms block of a take, FLAC-encoded here, with the header the recording path takes
    /// it with; nil when the encoder failed (logged).
    private static func packet(
        for chunk: KeptChunk, encoder: inout FlacEncoder?, source: any MicrophoneSource, route: MicrophoneRoute,
        allowed: Bool, consent: ConsentState, statistics: DeviceStatistics, deviceID: String,
        timestampSource: Capfleet_V1_AudioTimestampSource, logger: Logger
    ) -> PreRollFrame? {
        let format = AudioFormat(sampleRate: source.format.sampleRate, channels: source.format.channels, sampleFormat: .s16le)
        let frames = chunk.samples.count / format.channels
        if encoder == nil {
            do {
                encoder = try FlacEncoder(format: format, blockFrames: frames)
            } catch {
                logger.error("cannot encode the take's sound", metadata: ["device.id": "\(deviceID)", "error": "\(error)"])
                return nil
            }
        }
        guard let encoder else { return nil }
        var packet: FrameBuffer?
        var size = 0
        do {
            try chunk.samples.withUnsafeBufferPointer { samples throws(EncodingError) in
                try encoder.encode(samples, frames: frames) { bytes in
                    let buffer = FrameBuffer(unpooledCapacity: bytes.count)
                    if let base = bytes.baseAddress { buffer.storage.copyMemory(from: base, byteCount: bytes.count) }
                    packet = buffer
                    size = bytes.count
                }
            }
        } catch {
            logger.error("cannot encode the take's sound", metadata: ["device.id": "\(deviceID)", "error": "\(error)"])
            return nil
        }
        guard let packet else { return nil }
        var header = Capfleet_V1_FrameHeader()
        header.protocolVersion = WireDefaults.protocolMajor
        header.nodeID = route.nodeID
        header.deviceID = deviceID
        header.sequence = chunk.firstFrame / UInt64(max(frames, 1))
        header.captureMonotonicNs = route.clock.nodeClock.local(fromMonotonic: chunk.monotonic)
        header.fleetTimeNs = chunk.stamp.fleet
        header.fleetTimeUncertaintyNs = chunk.stamp.uncertainty
        header.payloadSize = UInt64(size)
        header.consent = consent.wire
        header.drops = statistics.drops.wire
        var flags =
            UInt32(Capfleet_V1_FrameFlag.fleetTimeValid.rawValue) | UInt32(Capfleet_V1_FrameFlag.recording.rawValue)
            | UInt32(Capfleet_V1_FrameFlag.keyFrame.rawValue)
        if source.isSynthetic { flags |= UInt32(Capfleet_V1_FrameFlag.synthetic.rawValue) }
        if !allowed { flags |= UInt32(Capfleet_V1_FrameFlag.black.rawValue) }
        header.flags = flags
        header.audio = .with {
            $0.format = format.wire
            $0.frames = UInt32(frames)
            $0.timestampSource = timestampSource
            $0.firstFrame = chunk.firstFrame
            if chunk.processing.isOn {
                $0.processing = chunk.processing.wire
                $0.processingDelayFrames = UInt32(chunk.delayFrames)
            }
        }
        header.encoded = .with {
            $0.codecConfig = Data(encoder.codecConfig)
            $0.encoder = FlacEncoder.encoderName
        }
        return PreRollFrame(header: header, pixels: packet, count: size)
    }
}
