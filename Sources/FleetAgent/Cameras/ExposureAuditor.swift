import FleetCapture
import FleetCore
import FleetDetection
import FleetProtocol
import FleetSystem
import Foundation
import Logging
import Synchronization

/// One camera's exposure audit (proto-docs/clock.md, "Auditing exposures"): for the audit's
/// length, the timecode in every frame is read on a thread of its own and paired with the fleet
/// time stamped on that frame. The capture thread only counts the frame and, if the decoder is
/// idle, copies the frame into the one buffer kept for it and hands it over; a frame that finds
/// the decoder busy is counted as skipped, never queued, so an audit never holds up capture.
final class ExposureAuditor: Sendable {
    typealias Answer = @Sendable (Capfleet_V1_ExposureAuditSamples) -> Void
    /// What the device was doing, read when the audit ends.
    typealias Conditions = @Sendable () -> (frameRate: Double, exposureSeconds: Double, gridOriginFleetNs: UInt64)

    static let defaultMaxSamples = 4096
    static let maximumDurationMilliseconds: UInt32 = 60_000

    let deviceID: String
    private struct Running {
        var id: UInt64
        var maxSamples: Int
        /// Ends it as its time running out does (`endNow`).
        var end: @Sendable () -> Void
        var seen: UInt64 = 0
        var skipped: UInt64 = 0
    }

    /// The audit under way; `active` lets the capture thread pass by without the lock.
    private let running = Mutex<Running?>(nil)
    private let active = Atomic<Bool>(false)
    private let lastID = Atomic<UInt64>(0)
    private let shared: Shared
    private let worker: OwnedWorker<Message>

    /// What the capture thread and the decoder both touch: whether the decoder is busy, and
    /// the frame copy it reads while it is (written only while it is not).
    private final class Shared: Sendable {
        let busy = Atomic<Bool>(false)
        let copy = Mutex<FrameBuffer?>(nil)
    }

    struct Job: Sendable {
        let auditID: UInt64
        let pixels: FrameBuffer
        let layout: FrameLayout
        let sequence: UInt64
        let stampedFleetNs: UInt64
        let uncertaintyNs: UInt64
        let maxSamples: Int
    }

    enum Message: Sendable {
        case frame(Job)
        case finish(auditID: UInt64, seen: UInt64, skipped: UInt64, conditions: Conditions, answer: Answer)
    }

    init(deviceID: String, logger: Logger) {
        self.deviceID = deviceID
        let shared = Shared()
        self.shared = shared
        worker = OwnedWorker(
            name: "cf-audit", state: { TimecodeReader(deviceID: deviceID, logger: logger) },
            handle: { reader, message in
                switch message {
                case let .frame(job):
                    defer { shared.busy.store(false, ordering: .releasing) }
                    reader.read(job)
                case let .finish(auditID, seen, skipped, conditions, answer):
                    answer(reader.finish(auditID: auditID, seen: seen, skipped: skipped, conditions: conditions()))
                }
            })
    }

    /// Starts an audit of `milliseconds` (0: 5 s; the command's limit of a minute is the
    /// caller's to keep) that answers once, when it ends; false if one is already under way.
    func begin(milliseconds: UInt32, maxSamples: UInt32, conditions: @escaping Conditions, answer: @escaping Answer) -> Bool {
        let id = lastID.add(1, ordering: .relaxed).newValue
        let started = running.withLock { running -> Bool in
            guard running == nil else { return false }
            running = Running(
                id: id, maxSamples: maxSamples == 0 ? Self.defaultMaxSamples : Int(maxSamples),
                end: { [weak self] in self?.end(id, conditions: conditions, answer: answer) })
            return true
        }
        guard started else { return false }
        active.store(true, ordering: .releasing)
        let length = milliseconds == 0 ? 5_000 : milliseconds
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(length))) { [self] in
            end(id, conditions: conditions, answer: answer)
        }
        return true
    }

    /// Ends audit `id` if it is still the one under way: off the capture path first, then to
    /// the decoder, behind the frames it has, to be answered.
    private func end(_ id: UInt64, conditions: @escaping Conditions, answer: @escaping Answer) {
        let ended = running.withLock { running -> Running? in
            guard running?.id == id else { return nil }
            return running.take()
        }
        guard let ended else { return }
        active.store(false, ordering: .releasing)
        worker.post(.finish(auditID: ended.id, seen: ended.seen, skipped: ended.skipped, conditions: conditions, answer: answer))
    }

    /// On the capture thread, for every frame while an audit runs: `stamp` is the fleet time
    /// stamped on it and that stamp's error bound; `real`, whether its pixels may be looked at
    /// (what a camera without consent sees stays unseen).
    func offer(_ frame: CapturedFrame, stamp: (fleet: UInt64, uncertainty: UInt64)?, real: Bool) {
        guard active.load(ordering: .acquiring) else { return }
        let taken = running.withLock { running -> (id: UInt64, maxSamples: Int)? in
            guard running != nil else { return nil }
            running!.seen += 1
            guard real, stamp != nil else { return nil }
            guard !shared.busy.exchange(true, ordering: .acquiringAndReleasing) else {
                running!.skipped += 1
                return nil
            }
            return (running!.id, running!.maxSamples)
        }
        guard let taken, let stamp else { return }
        // The decoder is idle: the copy is the capture thread's to write until it is handed over.
        let copy = shared.copy.withLock { copy -> FrameBuffer in
            if let kept = copy, kept.capacity >= frame.byteCount { return kept }
            copy = FrameBuffer(unpooledCapacity: frame.byteCount)
            return copy!
        }
        copy.storage.copyMemory(from: frame.buffer.storage, byteCount: frame.byteCount)
        let job = Job(
            auditID: taken.id, pixels: copy, layout: frame.layout, sequence: frame.sequence, stampedFleetNs: stamp.fleet,
            uncertaintyNs: stamp.uncertainty, maxSamples: taken.maxSamples)
        if !worker.post(.frame(job)) { shared.busy.store(false, ordering: .releasing) }
    }

    /// Whether the decoder is reading a frame now.
    var isDecoding: Bool { shared.busy.load(ordering: .acquiring) }

    /// Ends the audit under way now, answered as when its time runs out.
    func endNow() {
        running.withLock { $0?.end }?()
    }

    func stop() async { await worker.stop() }
}

/// The decoder thread's own: the QR scanner and what the audit under way has read.
private struct TimecodeReader {
    let deviceID: String
    let logger: Logger
    var scanner: BarcodeScanner?
    var auditID: UInt64 = 0
    /// Audits answered: a frame of one of them that reaches the decoder late is not read.
    var finishedThrough: UInt64 = 0
    var samples: [Capfleet_V1_ExposureSample] = []
    var decoded: UInt64 = 0
    var withoutTimecode: UInt64 = 0
    var unreadableFormatSaid = false

    init(deviceID: String, logger: Logger) {
        self.deviceID = deviceID
        self.logger = logger
    }

    mutating func read(_ job: ExposureAuditor.Job) {
        guard job.auditID > finishedThrough else { return }
        if job.auditID != auditID { startOver(job.auditID) }
        guard samples.count < job.maxSamples else { return }
        guard
            let luma = LumaPlane(
                base: job.pixels.storage, pixelFormat: job.layout.pixelFormat, width: job.layout.width, height: job.layout.height),
            let image = GreyImage(luma: luma)
        else {
            if !unreadableFormatSaid {
                unreadableFormatSaid = true
                logger.warning(
                    "an exposure audit cannot read this format: no luma plane",
                    metadata: ["device.id": "\(deviceID)", "format": "\(job.layout.pixelFormat)"])
            }
            return
        }
        let codes: [DetectedCode]
        do {
            if scanner == nil { scanner = try BarcodeScanner(symbologies: [.qr]) }
            codes = try scanner!.scan(image)
        } catch {
            logger.error("an exposure audit could not scan a frame", metadata: ["device.id": "\(deviceID)", "error": "\(error)"])
            return
        }
        decoded += 1
        guard let timecode = codes.lazy.compactMap({ ExposureTimecode(text: $0.value) }).first else {
            withoutTimecode += 1
            return
        }
        samples.append(
            .with {
                $0.sequence = job.sequence
                $0.stampedFleetNs = job.stampedFleetNs
                $0.uncertaintyNs = job.uncertaintyNs
                $0.timecodeNs = timecode.nanoseconds
                switch timecode {
                case let .hostMonotonic(bootID, _):
                    $0.clock = .hostMonotonic
                    $0.timecodeBootID = bootID
                case let .fleet(_, refresh):
                    $0.clock = .fleet
                    $0.displayRefreshMhz = refresh
                }
            })
    }

    mutating func finish(
        auditID: UInt64, seen: UInt64, skipped: UInt64, conditions: (frameRate: Double, exposureSeconds: Double, gridOriginFleetNs: UInt64)
    ) -> Capfleet_V1_ExposureAuditSamples {
        if auditID != self.auditID { startOver(auditID) }
        finishedThrough = max(finishedThrough, auditID)
        let answer = Capfleet_V1_ExposureAuditSamples.with {
            $0.samples = samples
            $0.framesSeen = seen
            $0.framesDecoded = decoded
            $0.framesSkipped = skipped
            $0.framesWithoutTimecode = withoutTimecode
            $0.frameRate = conditions.frameRate
            $0.exposureSeconds = conditions.exposureSeconds
            $0.gridOriginFleetNs = conditions.gridOriginFleetNs
        }
        startOver(0)
        return answer
    }

    private mutating func startOver(_ auditID: UInt64) {
        self.auditID = auditID
        samples = []
        decoded = 0
        withoutTimecode = 0
    }
}
