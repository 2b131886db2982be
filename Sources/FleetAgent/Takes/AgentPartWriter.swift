import FleetCapture
import FleetCore
import FleetProtocol
import FleetRecording
import FleetSystem
import Foundation
import Logging

/// One device's part of a take written on this host, on a worker thread of its own (every step
/// is blocking disk I/O): the capture thread hands each frame over (a copy of its pixels) and
/// never waits; the part's recorder writes it into the same Matroska segments the coordinator
/// writes, and the manifest beside them says what is there (`ManifestSegmentIndex`).
final class AgentPartWriter: Sendable {
    enum Input: Sendable {
        case frame(header: Capfleet_V1_FrameHeader, takeDrops: DropTally, pixels: FrameBuffer, count: Int)
        /// A take's pre-roll (recordings.md, "Pre-roll"), in one message: however many frames
        /// it holds, it counts once against the capacity live frames are offered against, so
        /// the live frame after a long pre-roll is not refused while the writer takes it up.
        case frames([PreRollFrame], takeDrops: DropTally)
        /// Frames captured at or after this fleet time are not the take's.
        case stop(at: UInt64)
        /// The part ends after the frames handed in so far, with the take's drops as the device
        /// counted them at the end.
        case end(reason: String, takeDrops: DropTally)
        /// Timed metadata (one JSON object) at a fleet time, into the current segment.
        case note(json: String, at: UInt64, track: MetadataTrack = .notes)
    }

    let key: TakeDeviceKey
    private let worker: OwnedWorker<Input>
    private let capacity: Int
    private let peak = TakeQueuePeak()

    /// - Parameters:
    ///   - capacity: frames that may wait for the disk; beyond it a frame is refused (and
    ///     counted by the caller as out of buffers).
    ///   - onEnded: runs on the writer's thread once the part's end is in its manifest.
    init(
        file: AgentPartFile, frameRate: Double, reserve: AgentRecordingSettings, hasher: SegmentHasher, capacity: Int = 64,
        clock: @escaping @Sendable () -> Int64, logger: Logger, onReportable: @escaping @Sendable () -> Void,
        onEnded: @escaping @Sendable () -> Void
    ) {
        key = file.key
        self.capacity = capacity
        var logger = logger
        logger[metadataKey: "take.id"] = "\(key.takeID)"
        logger[metadataKey: "device.id"] = "\(key.deviceID)"
        worker = OwnedWorker(
            name: "cf-part", capacity: capacity, whenFull: .refuseNewest, tickNanoseconds: 250_000_000,
            state: { [logger] in
                AgentPartRecorder(
                    file: file, frameRate: frameRate, settings: reserve, hasher: hasher, clock: clock, logger: logger,
                    onReportable: onReportable, onEnded: onEnded)
            },
            handle: { part, input in part.handle(input) },
            // What is written reaches the disk within half a second: an agent killed mid-take
            // loses at most that, and its restart repairs the segment.
            onTick: { part in part.flushIfDue() },
            finish: { part in part.close() })
    }

    /// From a capture thread; never blocks. False: the writer is that far behind, the frame is not taken.
    func offer(header: Capfleet_V1_FrameHeader, takeDrops: DropTally, pixels: FrameBuffer, count: Int) -> Bool {
        let taken = worker.offer(.frame(header: header, takeDrops: takeDrops, pixels: pixels, count: count))
        if taken { peak.noted(depth: worker.queued) } else { peak.full(capacity: capacity) }
        return taken
    }

    /// Frames waiting for the disk now, how many may, and the most that waited.
    var queue: TakeQueueFigures { TakeQueueFigures(depth: worker.queued, capacity: capacity, peak: peak.value) }

    func post(_ input: Input) { _ = worker.post(input) }

    /// Finishes what is queued and the open segment, then ends the thread.
    func shutdown() async { await worker.stop() }
}

/// The part's state, on its writer's thread only.
final class AgentPartRecorder {
    private let file: AgentPartFile
    private let recorder: DeviceTakeRecorder
    private let frameRate: Double
    private let settings: AgentRecordingSettings
    private let clock: @Sendable () -> Int64
    private let logger: Logger
    private let onEnded: @Sendable () -> Void
    /// Take sequence = device sequence &+ offset.
    private var offset: UInt64
    /// A new agent process goes on with the part: the first frame sets the offset.
    private var rebaseOnNextFrame: Bool
    private var lastSpaceCheck: UInt64 = 0
    private var lastFlush: UInt64 = 0
    private var dirty = false
    private var ended = false

    init(
        file: AgentPartFile, frameRate: Double, settings: AgentRecordingSettings, hasher: SegmentHasher,
        clock: @escaping @Sendable () -> Int64, logger: Logger, onReportable: @escaping @Sendable () -> Void,
        onEnded: @escaping @Sendable () -> Void
    ) {
        self.file = file
        self.frameRate = frameRate
        self.settings = settings
        self.clock = clock
        self.logger = logger
        self.onEnded = onEnded
        let manifest = file.current
        let index = ManifestSegmentIndex(file: file, clock: clock, onReportable: onReportable)
        let directory = (file.directory as NSString).deletingLastPathComponent
        let segmentLength = UInt64(max(manifest.segmentSeconds, 1)) * 1_000_000_000
        if let tally = manifest.lastTally {
            // Goes on after this agent restarted: the tally and the numbering carry on, and the
            // next frame opens a new segment.
            let resumed = TakeDeviceTally(
                pixelFormat: tally.pixelFormat, width: tally.width, height: tally.height, frameRate: tally.frameRate,
                firstFleetNs: tally.firstFleetNs, lastFleetNs: tally.lastFleetNs, firstSequence: tally.firstSequence,
                lastSequence: tally.lastSequence, frames: Int64(clamping: tally.frames), bytes: tally.bytes,
                drops: tally.drops.tally, encoder: tally.encoder ?? "", sourcePixelFormat: tally.sourcePixelFormat ?? "",
                bitDepth: tally.bitDepth ?? 8, colour: tally.colour.flatMap(ColourDescription.init), depthUnitMetres: tally.depthUnitMetres)
            recorder = DeviceTakeRecorder(
                takeID: manifest.takeID, deviceID: manifest.deviceID, title: manifest.title, directory: directory, start: manifest.startFleetNs,
                stop: manifest.stopFleetNs, segmentLength: segmentLength, index: index, resuming: resumed,
                segmentsSoFar: manifest.segments.map(\.number).max() ?? 0)
            recorder.restartDropReports()
            rebaseOnNextFrame = tally.lastSequence != nil
        } else {
            recorder = DeviceTakeRecorder(
                takeID: manifest.takeID, deviceID: manifest.deviceID, title: manifest.title, directory: directory,
                start: manifest.startFleetNs, segmentLength: segmentLength, index: index)
            if let stop = manifest.stopFleetNs { recorder.stop(at: stop) }
            rebaseOnNextFrame = false
        }
        offset = manifest.sequenceOffset
        recorder.hasher = hasher
    }

    func handle(_ input: AgentPartWriter.Input) {
        guard !ended else { return }
        switch input {
        case let .frame(header, takeDrops, pixels, count):
            write(header, takeDrops: takeDrops, pixels: pixels, count: count)
        case let .frames(frames, takeDrops):
            for frame in frames { write(frame.header, takeDrops: takeDrops, pixels: frame.pixels, count: frame.count) }
        case let .stop(at):
            recorder.stop(at: at)
            save("noting the stop") { $0.stopFleetNs = at }
        case let .end(reason, takeDrops):
            recorder.ended(cumulativeDrops: takeDrops)
            finish(reason: reason, failed: false)
        case let .note(json, at, track):
            do {
                try recorder.note(json, at: at, track: track)
                dirty = true
            } catch {
                logger.warning("cannot write timed metadata", metadata: ["error": "\(error)"])
            }
        }
    }

    func flushIfDue() {
        guard dirty, !ended, MonotonicTime.now() &- lastFlush >= 500_000_000 else { return }
        lastFlush = MonotonicTime.now()
        dirty = false
        do {
            try recorder.flush()
        } catch {
            finish(reason: "cannot write to the disk: \(error)", failed: true)
        }
    }

    /// The agent stops with the part still recording: its open segment is finished so it
    /// plays, and the part goes on in a new segment when the coordinator asks again.
    func close() {
        guard !ended else { return }
        do {
            try recorder.finish()
            try recorder.waitForChecksums()
        } catch {
            logger.error("cannot finish the part's segment at shutdown", metadata: ["error": "\(error)"])
        }
    }

    private func write(_ header: Capfleet_V1_FrameHeader, takeDrops: DropTally, pixels: FrameBuffer, count: Int) {
        if MonotonicTime.now() &- lastSpaceCheck >= 250_000_000 {
            lastSpaceCheck = MonotonicTime.now()
            if let free = DiskSpace.availableBytes(at: settings.directory), free < settings.reserveBytes {
                finish(
                    reason:
                        "the disk holding \(settings.directory) is nearly full: \(free >> 20) MiB free, below the \(settings.reserveBytes >> 20) MiB kept in reserve. The part stopped; what it holds is finished and plays. Collect and delete takes (capfleet recordings collect, delete) or set recordings_dir to a larger disk",
                    failed: true)
                return
            }
        }
        if rebaseOnNextFrame, let last = recorder.ledger.lastSequence {
            // The frames this host captured but never wrote (the agent died with them) and the
            // time it was down leave a gap in the take's numbering: counted as discontinuity.
            var missing: UInt64 = 0
            if let lastFleet = recorder.ledger.lastFleetTime, header.fleetTimeNs > lastFleet, frameRate > 0 {
                let frames = (Double(header.fleetTimeNs - lastFleet) / 1e9 * frameRate).rounded()
                missing = frames > 1 ? UInt64(min(frames - 1, 1e12)) : 0
            }
            offset = (last &+ 1 &+ missing) &- header.sequence
            rebaseOnNextFrame = false
            let newOffset = offset
            save("noting the sequence offset") { $0.sequenceOffset = newOffset }
            logger.notice("the part goes on after the agent restarted", metadata: ["frames.missing": "\(missing)"])
        }
        let format = RecordedVideoFormat(header: header, frameRate: frameRate)
        let wasEmpty = recorder.ledger.lastSequence == nil
        do {
            let verdict = try recorder.record(
                UnsafeRawBufferPointer(start: pixels.storage, count: count), sequence: header.sequence &+ offset,
                fleetTime: header.fleetTimeNs, format: format, cumulativeDrops: takeDrops,
                keyFrame: header.isKeyFrame, settingsNote: header.processingNote, framing: header.framingCrop,
                framingOptical: header.framingOptical)
            if verdict == .keep {
                dirty = true
                if wasEmpty { flushIfDueNow() }
            }
        } catch {
            finish(reason: "cannot write frame \(header.sequence): \(error)", failed: true)
        }
    }

    /// The first frame is on disk at once: the take's start is then a fact.
    private func flushIfDueNow() {
        lastFlush = 0
        flushIfDue()
    }

    /// The part ends: its open segment is finished, every segment checksummed, and the end is
    /// in the manifest, from where the link reports it once every segment is indexed.
    private func finish(reason: String, failed: Bool) {
        guard !ended else { return }
        ended = true
        var message = reason
        do {
            try recorder.finish()
            try recorder.waitForChecksums()
        } catch {
            message = failed ? "\(reason); then finishing the segment failed too: \(error)" : "cannot finish the part's segments: \(error)"
            logger.error("the part's last segment could not be finished", metadata: ["error": "\(error)"])
        }
        let failedNow = failed || message != reason
        if failedNow { logger.error("the part stopped on an error", metadata: ["error": "\(message)"]) }
        let ended = clock()
        save("noting the part's end") { $0.end = ManifestEnd(reason: message, failed: failedNow, endedUnixMs: ended) }
        onEnded()
    }

    /// A manifest that cannot be saved is a disk that cannot be written: the part stops.
    private func save(_ what: String, _ change: (inout AgentPartManifest) -> Void) {
        do {
            try file.update(change)
        } catch {
            logger.error("cannot save the part's manifest", metadata: ["doing": "\(what)", "error": "\(error)"])
            if !ended { finish(reason: "\(what): \(error)", failed: true) }
        }
    }
}
