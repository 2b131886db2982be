import FleetCapture
import FleetCore
import FleetProtocol
import FleetSystem
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
        var consent: ConsentState
        var framesCaptured: UInt64 = 0
        /// The next block's first frame, counted from the start of capture (gaps included).
        var nextFrame: UInt64 = 0
        var sequence: UInt64 = 0
        var timestampSource: Capfleet_V1_AudioTimestampSource = .unspecified
        var failure: String?
    }

    private final class Box: Sendable {
        let shared: Mutex<Shared>
        let running = Atomic<Bool>(false)
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
                fit: AudioClockFit(sampleRate: format.sampleRate), consent: consent))
        statistics = DeviceStatistics(deviceID: deviceID, outOfBuffers: { 0 })
        thread = OwnedThread(name: "cf-mic")
    }

    var descriptor: Capfleet_V1_DeviceDescriptor { source.descriptor }

    var isAllowed: Bool { box.shared.withLock { $0.consent.allowsRealFrames } }

    func setConsent(_ consent: ConsentState) {
        let (was, now) = box.shared.withLock { state in
            defer { state.consent = consent }
            return (state.consent.allowsRealFrames, consent.allowsRealFrames)
        }
        if was != now, box.running.load(ordering: .relaxed) { onRealSamples(deviceID, now) }
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
            }
        }
    }

    /// Starts capturing on the microphone's thread; a source that fails is logged and stays stopped.
    func start(route: MicrophoneRoute) {
        guard !box.running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let (box, source, logger, deviceID, liveFlow, statistics) = (box, source, logger, deviceID, liveFlow, statistics)
        if isAllowed { onRealSamples(deviceID, true) }
        thread.start {
            do {
                try source.capture(clock: route.clock, running: { box.running.load(ordering: .relaxed) }) { samples, block in
                    Self.take(&samples, block, box: box, source: source, route: route, liveFlow: liveFlow, statistics: statistics, deviceID: deviceID)
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

    /// One block, on the microphone's thread: silenced without consent, metered, placed on the
    /// fitted audio clock, and sent on the live path while someone listens.
    private static func take(
        _ samples: inout [Int16], _ block: MicrophoneBlock, box: Box, source: any MicrophoneSource, route: MicrophoneRoute,
        liveFlow: LiveFlowGate, statistics: DeviceStatistics, deviceID: String
    ) {
        let format = source.format
        let count = block.frames * format.channels
        let (allowed, consent, firstFrame, sequence, smoothed, jitter) = box.shared.withLock { state in
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
            samples.withUnsafeBufferPointer { state.meter.add(UnsafeBufferPointer(rebasing: $0[0..<count])) }
            state.framesCaptured += UInt64(block.frames)
            state.nextFrame += UInt64(block.frames)
            state.sequence += 1
            return (
                state.consent.allowsRealFrames, state.consent, first, state.sequence, state.fit.time(ofFrame: first) ?? block.firstFrameMonotonicNs,
                state.fit.jitterNanoseconds
            )
        }
        guard liveFlow.isOpen() else { return }
        let bytes = count * 2
        let buffer = FrameBuffer(unpooledCapacity: bytes)
        samples.withUnsafeBytes { buffer.storage.copyMemory(from: $0.baseAddress!, byteCount: bytes) }
        var header = Capfleet_V1_FrameHeader()
        header.protocolVersion = WireDefaults.protocolMajor
        header.nodeID = route.nodeID
        header.deviceID = deviceID
        header.sequence = sequence
        header.captureMonotonicNs = smoothed
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
            $0.frames = UInt32(block.frames)
            $0.timestampSource = block.timestampSource
            $0.firstFrame = firstFrame
        }
        route.publish(buffer, bytes, header)
    }
}
