import FleetCapture
import FleetCore
import FleetProtocol
import FleetRecording
import FleetSystem
import Foundation
import Logging
import Synchronization

/// Where and how this host records takes (recordings.md, "Where takes are written").
public struct AgentRecordingSettings: Sendable, Equatable {
    /// The parts' folders, one per take (setting `recordings_dir`; default the state
    /// directory's `recordings`).
    public var directory: String
    /// Free space never used: below it no part starts, and a recording part stops while its
    /// files can still be finished (setting `record_reserve_mb`).
    public var reserveBytes: Int64 = 256 << 20
    /// Segments the coordinator holds a verified copy of are removed after this many days
    /// (setting `recordings_keep_days`; 0 keeps them). Segments only this host holds are
    /// never removed by retention.
    public var keepDays: Int = 30
    /// Collect's read rate from this disk, bytes a second (setting `collect_rate_mb`; 0: no
    /// limit), so copying a take never starves the cameras recording now.
    public var collectBytesPerSecond: Int64 = 100 << 20

    public init(directory: String) {
        self.directory = directory
    }
}

/// The takes recorded on this host: each device's part written by its own writer thread
/// (`AgentPartWriter`), and the catalogue of every part on the disk, with its manifest, from
/// which the recordings link reports segments and serves collect and verify.
final class AgentTakeStore: TakeFramePath, Sendable {
    let settings: AgentRecordingSettings
    let hasher = SegmentHasher()
    private let parts = Mutex<[TakeDeviceKey: AgentPartFile]>([:])
    private let writers = Mutex<[TakeDeviceKey: AgentPartWriter]>([:])
    /// Frame rates of the parts about to begin (from the command that started them).
    private let frameRates = Mutex<[TakeDeviceKey: Double]>([:])
    /// What came for a prepared part before its first frame began its writer: a sensor
    /// batch or a note can arrive first (the device's first frame of the take is still on
    /// its way), and it belongs in the file all the same.
    private let waiting = Mutex<[TakeDeviceKey: [AgentPartWriter.Input]]>([:])
    /// Parts whose timed metadata found no writer and no prepared part: said once each.
    private let unplaced = Mutex<Set<TakeDeviceKey>>([])
    /// Entries held for one part before its writer begins, at most (a minute of a sensor
    /// stream's batches at 20 a second, with room for notes).
    static let waitingLimit = 2_000
    /// Writers closing on their own threads: shutdown waits for them.
    private let closing = Mutex<[Task<Void, Never>]>([])
    private let clock: @Sendable () -> Int64
    private let logger: Logger
    /// Something new to report (a segment checksummed, a part ended): the link looks now.
    let reportable = Mutex<(@Sendable () -> Void)?>(nil)

    init(settings: AgentRecordingSettings, logger: Logger, clock: @escaping @Sendable () -> Int64 = WallClock.system.unixMilliseconds) {
        self.settings = settings
        self.logger = logger
        self.clock = clock
    }

    // MARK: The catalogue

    var allParts: [AgentPartFile] { parts.withLock { Array($0.values) } }

    func part(_ key: TakeDeviceKey) -> AgentPartFile? { parts.withLock { $0[key] } }

    func isWriting(_ key: TakeDeviceKey) -> Bool { writers.withLock { $0[key] != nil } }

    /// At the agent's start, before any take is taken up: every part on the disk is read, and
    /// every segment left open (the agent died while writing it) is repaired so it plays and
    /// noted with what its file holds. Blocking disk I/O: run on a thread of its own.
    func recoverParts() -> [String] {
        var notes: [String] = []
        let fileManager = FileManager.default
        guard let takes = try? fileManager.contentsOfDirectory(atPath: settings.directory) else { return [] }
        for take in takes.sorted() {
            let takeDirectory = settings.directory + "/" + take
            for device in (try? fileManager.contentsOfDirectory(atPath: takeDirectory))?.sorted() ?? [] {
                let directory = takeDirectory + "/" + device
                let path = directory + "/" + AgentPartManifest.fileName
                guard fileManager.fileExists(atPath: path) else { continue }
                let manifest: AgentPartManifest
                do {
                    manifest = try AgentPartManifest.load(path: path)
                } catch {
                    notes.append("cannot read \(path), the part is left alone: \(error)")
                    continue
                }
                let file = AgentPartFile(directory: directory, manifest: manifest)
                notes += repairOpenSegments(of: file)
                parts.withLock { $0[file.key] = file }
            }
        }
        return notes
    }

    private func repairOpenSegments(of file: AgentPartFile) -> [String] {
        var notes: [String] = []
        let manifest = file.current
        var tally = manifest.lastTally ?? ManifestTally()
        for segment in manifest.segments where segment.state == .open {
            do {
                let outcome = try SegmentRepair.repair(path: segment.path)
                let size = (try? FileManager.default.attributesOfItem(atPath: segment.path)[.size] as? Int64) ?? 0
                let sha = try SegmentDigest.sha256(ofFile: segment.path)
                let start = manifest.startFleetNs
                tally.frames += UInt64(outcome.frames)
                tally.bytes += Int64(outcome.payloadBytes)
                if tally.firstSequence == nil { tally.firstSequence = outcome.firstSequence }
                if let last = outcome.lastSequence { tally.lastSequence = max(tally.lastSequence ?? 0, last) }
                if tally.firstFleetNs == nil { tally.firstFleetNs = outcome.firstTimestamp.map { start + $0 } }
                if let last = outcome.lastTimestamp { tally.lastFleetNs = max(tally.lastFleetNs ?? 0, start + last) }
                tally.drops = ManifestDrops(tally.drops.tally.adding(outcome.dropped))
                let repairedTally = tally, closed = clock()
                try file.update { manifest in
                    guard let index = manifest.segments.firstIndex(where: { $0.number == segment.number }) else { return }
                    manifest.segments[index].state = .repaired
                    manifest.segments[index].sizeBytes = size
                    manifest.segments[index].sha256 = sha
                    manifest.segments[index].frames = UInt64(outcome.frames)
                    manifest.segments[index].firstSequence = outcome.firstSequence
                    manifest.segments[index].lastSequence = outcome.lastSequence
                    manifest.segments[index].firstFleetNs = outcome.firstTimestamp.map { start + $0 }
                    manifest.segments[index].lastFleetNs = outcome.lastTimestamp.map { start + $0 }
                    manifest.segments[index].drops = ManifestDrops(outcome.dropped)
                    manifest.segments[index].tally = repairedTally
                    manifest.segments[index].closedUnixMs = closed
                }
                notes.append(
                    "repaired \(segment.path): \(outcome.frames) frames kept, \(outcome.partialFramesDropped) cut short by the crash left out")
            } catch {
                // Nothing playable reached the disk (a crash before the file's header): forgotten.
                unlink(segment.path)
                do {
                    try file.update { $0.segments.removeAll { $0.number == segment.number } }
                } catch {
                    notes.append("cannot save \(file.path): \(error)")
                }
                notes.append("forgot \(segment.path): nothing playable was written (\(error))")
            }
        }
        return notes
    }

    // MARK: Taking up a part

    enum Preparation: Equatable {
        /// Frames may come (`begin` follows).
        case ready
        /// The part ended on this host already (it is reported, or being reported): nothing to do.
        case alreadyEnded
    }

    /// A take's part is to be recorded here: its folder and manifest (new, or the one an
    /// earlier run of this agent left). Refused when the disk is below its reserve.
    func prepare(
        takeID: String, deviceID: String, start: UInt64, segmentSeconds: Int, title: String, frameRate: Double,
        agentInstance: String
    ) throws(AgentTakeRefusal) -> Preparation {
        let key = TakeDeviceKey(takeID: takeID, deviceID: deviceID)
        if isWriting(key) { return .ready }
        if let existing = part(key) {
            if existing.current.end != nil { return .alreadyEnded }
        } else {
            if let free = DiskSpace.availableBytes(at: settings.directory), free < settings.reserveBytes {
                throw .diskFull(directory: settings.directory, free: free, reserve: settings.reserveBytes)
            }
            let directory = settings.directory + "/" + Self.safe(takeID) + "/" + Self.safe(deviceID)
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw .cannotCreate(directory: directory, "\(error)")
            }
            let manifest = AgentPartManifest(
                takeID: takeID, deviceID: deviceID, title: title.isEmpty ? "\(takeID) — \(deviceID)" : title,
                startFleetNs: start, segmentSeconds: segmentSeconds > 0 ? segmentSeconds : 300,
                createdUnixMs: clock(), agentInstance: agentInstance)
            let file = AgentPartFile(directory: directory, manifest: manifest)
            do {
                try file.update { _ in }
            } catch {
                throw .cannotCreate(directory: directory, error.description)
            }
            parts.withLock { $0[key] = file }
        }
        if let file = part(key) {
            do {
                try file.update { $0.agentInstance = agentInstance }
            } catch {
                throw .cannotCreate(directory: file.directory, error.description)
            }
        }
        frameRates.withLock { $0[key] = frameRate }
        return .ready
    }

    /// Timed metadata for a part recorded here: to its writer, or held until the writer
    /// begins. A part this host does not record says so in the log, once.
    func note(_ key: TakeDeviceKey, json: String, at fleetNs: UInt64, track: MetadataTrack = .notes) {
        deliver(.note(json: json, at: fleetNs, track: track), to: key)
    }

    /// The take stops at `at` (fleet ns): the writer keeps no frame from then on.
    func stop(takeID: String, deviceID: String, at: UInt64) {
        deliver(.stop(at: at), to: TakeDeviceKey(takeID: takeID, deviceID: deviceID))
    }

    /// Posts happen under the writers' lock, as `begin`'s hand-over does: what waited goes
    /// to the writer before anything delivered after it.
    private func deliver(_ input: AgentPartWriter.Input, to key: TakeDeviceKey) {
        enum Outcome { case posted, held, full, unknown }
        let outcome: Outcome = writers.withLock { writers in
            if let writer = writers[key] {
                writer.post(input)
                return .posted
            }
            guard frameRates.withLock({ $0[key] != nil }) else { return .unknown }
            return waiting.withLock { waiting in
                guard waiting[key, default: []].count < Self.waitingLimit else { return .full }
                waiting[key, default: []].append(input)
                return .held
            }
        }
        switch outcome {
        case .posted, .held: break
        case .full:
            logger.warning(
                "timed metadata for a part whose first frame has not come is more than this host holds: dropped",
                metadata: ["take.id": "\(key.takeID)", "device.id": "\(key.deviceID)", "held": "\(Self.waitingLimit)"])
        case .unknown:
            guard unplaced.withLock({ $0.insert(key).inserted }) else { return }
            logger.warning(
                "timed metadata for a part this host is not recording: dropped (said once per part)",
                metadata: ["take.id": "\(key.takeID)", "device.id": "\(key.deviceID)"])
        }
    }

    // MARK: TakeFramePath

    /// Frames written here stay here: viewers get them on the live path.
    var reachesCoordinator: Bool { false }

    func begin(takeID: String, deviceID: String) {
        let key = TakeDeviceKey(takeID: takeID, deviceID: deviceID)
        guard let file = part(key), file.current.end == nil else { return }
        // Under the writers' lock: what waited is posted before anything delivered later.
        let began: AgentPartWriter? = writers.withLock { writers in
            guard writers[key] == nil else { return nil }
            let writer = AgentPartWriter(
                file: file, frameRate: frameRates.withLock { $0[key] } ?? 0, reserve: settings, hasher: hasher, clock: clock, logger: logger,
                onReportable: { [weak self] in self?.somethingToReport() },
                onEnded: { [weak self] in
                    self?.retire(key)
                    self?.somethingToReport()
                })
            writers[key] = writer
            for input in waiting.withLock({ $0.removeValue(forKey: key) }) ?? [] { writer.post(input) }
            frameRates.withLock { _ = $0.removeValue(forKey: key) }
            return writer
        }
        guard began != nil else { return }
        logger.info("recording on this host", metadata: ["take.id": "\(takeID)", "device.id": "\(deviceID)", "path": "\(file.directory)"])
    }

    func submit(takeID: String, deviceID: String, header: Capfleet_V1_FrameHeader, takeDrops: DropTally, pixels: FrameBuffer, count: Int) -> Bool {
        guard let writer = writers.withLock({ $0[TakeDeviceKey(takeID: takeID, deviceID: deviceID)] }) else { return false }
        return writer.offer(header: header, takeDrops: takeDrops, pixels: pixels, count: count)
    }

    func submitPreRoll(takeID: String, deviceID: String, frames: [PreRollFrame], takeDrops: DropTally) -> Int {
        guard let writer = writers.withLock({ $0[TakeDeviceKey(takeID: takeID, deviceID: deviceID)] }) else { return frames.count }
        writer.post(.frames(frames, takeDrops: takeDrops))
        return 0
    }

    func queue(takeID: String, deviceID: String) -> TakeQueueFigures? {
        writers.withLock { $0[TakeDeviceKey(takeID: takeID, deviceID: deviceID)] }?.queue
    }

    func end(takeID: String, deviceID: String, takeDrops: DropTally, reason: String, withholding: Bool) {
        // Nothing of an agent-held part has left the host: consent withdrawn ends it like a stop.
        let key = TakeDeviceKey(takeID: takeID, deviceID: deviceID)
        let writer = writers.withLock { writers in
            // A part that ends before its first frame: what waited for its writer goes with it.
            if writers[key] == nil { waiting.withLock { _ = $0.removeValue(forKey: key) } }
            return writers[key]
        }
        writer?.post(.end(reason: reason, takeDrops: takeDrops))
    }

    private func somethingToReport() { reportable.withLock { $0 }?() }

    /// A part's writer has ended it: its thread goes.
    private func retire(_ key: TakeDeviceKey) {
        guard let writer = writers.withLock({ $0.removeValue(forKey: key) }) else { return }
        closing.withLock { tasks in
            tasks.removeAll { $0.isCancelled }
            tasks.append(Task { await writer.shutdown() })
        }
    }

    // MARK: Removing

    /// The take was deleted from the coordinator's index: the part's files go (not while it records).
    func remove(_ key: TakeDeviceKey) -> String? {
        guard !isWriting(key), let file = part(key) else { return nil }
        do {
            try FileManager.default.removeItem(atPath: file.directory)
        } catch {
            return "cannot remove \(file.directory): \(error)"
        }
        parts.withLock { $0[key] = nil }
        let takeDirectory = (file.directory as NSString).deletingLastPathComponent
        rmdir(takeDirectory)
        return nil
    }

    /// Retention: segments safe elsewhere (collected, or proved on a storage destination)
    /// older than `keepDays` are removed from this disk; under disk pressure (free space below
    /// twice the reserve) the oldest of them go too, whatever their age, until it is back
    /// there. A segment only this host holds is never removed, and `keepDays` 0 removes
    /// nothing. A part whose every segment went is forgotten. Returns what it removed.
    func applyRetention() -> [String] {
        applyRetention(nowUnixMs: clock(), freeBytes: DiskSpace.availableBytes(at: settings.directory))
    }

    func applyRetention(nowUnixMs: Int64, freeBytes: Int64? = nil) -> [String] {
        guard settings.keepDays > 0 else { return [] }
        let horizon = nowUnixMs - Int64(settings.keepDays) * 86_400_000
        let files = allParts.filter { !isWriting($0.key) && $0.current.isSettled }
        let safe = files.flatMap { file in file.current.segments.filter(\.isSafeElsewhere).map { (part: file.key, segment: $0) } }
        var chosen: [TakeDeviceKey: Set<Int>] = [:]
        var freed: Int64 = 0
        for (part, segment) in safe where (segment.closedUnixMs ?? nowUnixMs) < horizon {
            chosen[part, default: []].insert(segment.number)
            freed += segment.sizeBytes
        }
        if let freeBytes, freeBytes + freed < 2 * settings.reserveBytes {
            for (part, segment) in safe.sorted(by: { ($0.segment.closedUnixMs ?? 0) < ($1.segment.closedUnixMs ?? 0) })
            where chosen[part]?.contains(segment.number) != true {
                guard freeBytes + freed < 2 * settings.reserveBytes else { break }
                chosen[part, default: []].insert(segment.number)
                freed += segment.sizeBytes
            }
        }
        var removed: [String] = []
        for file in files {
            guard let numbers = chosen[file.key] else { continue }
            let manifest = file.current
            let expired = manifest.segments.filter { numbers.contains($0.number) }
            for segment in expired {
                unlink(segment.path)
                removed.append(segment.path)
            }
            if expired.count == manifest.segments.count {
                _ = remove(file.key)
            } else {
                do {
                    try file.update { manifest in
                        for segment in expired { manifest.segments.removeAll { $0.number == segment.number } }
                    }
                } catch {
                    logger.error("cannot save a part's manifest after retention", metadata: ["path": "\(file.path)", "error": "\(error)"])
                }
            }
        }
        return removed
    }

    /// Finishes every part's open segment (they go on in a new one when the coordinator asks again).
    func shutdown() async {
        let all = writers.withLock { writers in
            defer { writers.removeAll() }
            return Array(writers.values)
        }
        for writer in all { await writer.shutdown() }
        for task in closing.withLock({ $0 }) { await task.value }
        await hasher.stop()
    }

    /// Ids become directory names: nothing but what is safe in one.
    static func safe(_ id: String) -> String {
        String(id.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." ? $0 : "_" })
    }
}

/// Why this host cannot record a part.
enum AgentTakeRefusal: Error, CustomStringConvertible {
    case diskFull(directory: String, free: Int64, reserve: Int64)
    case cannotCreate(directory: String, String)

    var description: String {
        switch self {
        case let .diskFull(directory, free, reserve):
            "the disk holding \(directory) is nearly full: \(free >> 20) MiB free, below the \(reserve >> 20) MiB kept in reserve. Collect and delete takes (capfleet recordings collect, delete) or set recordings_dir to a larger disk"
        case let .cannotCreate(directory, detail):
            "cannot create the part's folder \(directory): \(detail)"
        }
    }
}
