import FleetCore
import FleetSystem
import Glibc

/// A segment about to be written.
public struct SegmentOpening: Sendable, Equatable {
    public var takeID: String
    public var deviceID: String
    public var number: Int
    public var path: String
}

/// A segment written, closed and checksummed: what the index keeps of its file.
public struct FinishedSegment: Sendable, Equatable {
    public var takeID: String
    public var deviceID: String
    public var number: Int
    public var path: String
    public var sizeBytes: Int64
    public var sha256: String
    public var frames: Int
    public var firstFleetTime: UInt64?
    public var lastFleetTime: UInt64?
    public var firstSequence: UInt64?
    public var lastSequence: UInt64?
    public var format: RecordedVideoFormat
}

/// Where a recorder tells what it writes. Both calls return once the index has it, so after
/// every segment the index and the files agree; the recorder's thread waits for them.
public protocol SegmentIndexing: Sendable {
    func segmentOpened(_ segment: SegmentOpening) throws(RecordingError)
    /// `ledger` is the device's whole tally so far (frames stored, drops by reason), and
    /// `payloadBytes` the frame bytes of all its segments so far.
    func segmentFinished(_ segment: FinishedSegment, ledger: TakeFrameLedger, payloadBytes: Int64) throws(RecordingError)
    /// The segment's SHA-256, computed after it was indexed (a recorder with a hasher).
    func segmentChecksummed(_ segment: FinishedSegment, sha256: String) throws(RecordingError)
}

extension SegmentIndexing {
    public func segmentChecksummed(_ segment: FinishedSegment, sha256: String) throws(RecordingError) {}
}

/// Records one device's part of a take into Matroska segments: keeps the frames the take
/// holds (`TakeFrameLedger`), starts a new segment on each segment boundary (multiples of
/// the segment length from the take's start, so every device's segments line up) and on a
/// format change (a track's resolution cannot change), and indexes each segment as it opens
/// and finishes. One thread owns it: every call is blocking disk I/O.
public final class DeviceTakeRecorder {
    public let takeID: String
    public let deviceID: String
    public let title: String
    public let directory: String
    public let segmentLength: UInt64
    public private(set) var ledger: TakeFrameLedger
    /// Frame bytes written, all segments.
    public private(set) var payloadBytes: Int64 = 0
    private let index: any SegmentIndexing
    /// Checksums finished segments off this thread; nil: each is checksummed before it is indexed.
    public var hasher: SegmentHasher?
    private let checksums = ChecksumsInFlight()
    private var writer: MatroskaSegmentWriter?
    private var segment: FinishedSegment?
    private var segmentSlot: UInt64 = 0
    private var segmentCount = 0
    /// Metadata noted before the first frame: written at the top of the first segment.
    private var pendingMetadata: [(json: String, at: UInt64, track: MetadataTrack)] = []
    /// The last sequence marker written into the file (SequenceMarker), and the drops
    /// counted up to it.
    private var marked: (sequence: UInt64, fleetTime: UInt64, dropped: DropTally)?
    private var segmentFramesSinceMark = 0
    /// The auto-framing crop last written in this segment (FramingEntry); nil: none yet.
    private var framingNoted: (crop: NormalizedRect?, optical: Bool)?

    /// The frames' exact times not yet written (FrameTimesEntry), and the last one's.
    private var timesRun: FrameTimesEntry?
    private var timesRunLast: UInt64 = 0
    /// How the payload was processed (a microphone's processing), as a metadata entry: written
    /// at the top of every segment and wherever it changes.
    private var settingsNote: String?
    private var settingsNoted = false

    /// `directory` is the take's; the device's segments go in a folder of its own there.
    public init(
        takeID: String, deviceID: String, title: String, directory: String, start: UInt64,
        segmentLength: UInt64 = 300_000_000_000, index: any SegmentIndexing
    ) {
        self.takeID = takeID
        self.deviceID = deviceID
        self.title = title
        self.directory = directory + "/" + deviceID
        self.segmentLength = max(segmentLength, 1_000_000_000)
        ledger = TakeFrameLedger(start: start)
        self.index = index
    }

    /// Goes on with a part the index already holds (the coordinator restarted mid-take): the
    /// tally and the segment numbering carry on, and the next frame opens a new segment.
    public convenience init(
        takeID: String, deviceID: String, title: String, directory: String, start: UInt64, stop: UInt64?,
        segmentLength: UInt64 = 300_000_000_000, index: any SegmentIndexing,
        resuming part: TakeDeviceTally, segmentsSoFar: Int
    ) {
        self.init(
            takeID: takeID, deviceID: deviceID, title: title, directory: directory, start: start,
            segmentLength: segmentLength, index: index)
        ledger = TakeFrameLedger(
            start: start, stop: stop, stored: UInt64(max(part.frames, 0)), dropped: part.drops,
            firstSequence: part.firstSequence, lastSequence: part.lastSequence,
            firstFleetTime: part.firstFleetNs, lastFleetTime: part.lastFleetNs)
        payloadBytes = part.bytes
        segmentCount = segmentsSoFar
        marked = part.lastSequence.map { ($0, part.lastFleetNs ?? 0, part.drops) }
    }

    deinit { _ = try? finish() }

    /// The agent restarted: its drop counts begin again from zero.
    public func restartDropReports() { ledger.restartDropReports() }

    /// Puts every frame recorded so far on disk (the open segment's cluster is written out).
    /// Returns the last sequence now safe from a crash of this process.
    @discardableResult
    public func flush() throws(RecordingError) -> UInt64? {
        try writer?.flush()
        return ledger.lastSequence
    }

    /// One frame as it arrived; returns what the take made of it (nil: an encoded packet
    /// that cannot start a segment, see below). `settingsNote`, a JSON object saying how the
    /// payload was processed, goes into the metadata track at the top of each segment and
    /// wherever it changes.
    /// Encoded packets (`format.needsKeyFrameToStart`) open a segment only at a key frame:
    /// until one comes, packets that could not be decoded are not kept (`awaitingKeyFrame`,
    /// and the ledger counts them as the gap they leave), and a segment boundary waits for it.
    @discardableResult
    public func record(
        _ payload: UnsafeRawBufferPointer, sequence: UInt64, fleetTime: UInt64, format: RecordedVideoFormat,
        cumulativeDrops: DropTally, keyFrame: Bool = true, settingsNote: String? = nil, framing: NormalizedRect? = nil,
        framingOptical: Bool = false
    ) throws(RecordingError) -> TakeFrameLedger.Verdict? {
        let mustOpen = writer == nil || writer?.format != format
        if mustOpen, format.needsKeyFrameToStart, !keyFrame, fleetTime >= ledger.start { return nil }
        let verdict = ledger.admit(sequence: sequence, fleetTime: fleetTime, cumulativeDrops: cumulativeDrops)
        guard verdict == .keep else { return verdict }
        let sinceStart = fleetTime - ledger.start
        let slot = sinceStart / segmentLength
        if mustOpen || (slot != segmentSlot && (keyFrame || !format.needsKeyFrameToStart)) {
            try finishSegment()
            try openSegment(format: format, slot: slot)
        }
        guard let writer else { return verdict }
        if settingsNote != self.settingsNote {
            self.settingsNote = settingsNote
            settingsNoted = false
        }
        if !settingsNoted, let settingsNote {
            try writer.appendMetadata(settingsNote, at: sinceStart, duration: 1_000_000)
            settingsNoted = true
        }
        // The file carries its frames' sequence numbers: a marker before the first frame of a
        // segment, after every gap, and once a second (one per cluster), so the file alone
        // says which frames it holds and which are missing, even after a crash.
        let expected = marked.map { $0.sequence + UInt64(segmentFramesSinceMark) }
        // Exact times go in runs of consecutive frames, at most a second long.
        if let run = timesRun, run.sequence + UInt64(run.intervals.count) + 1 == sequence, fleetTime >= timesRunLast,
            fleetTime - run.fleetTime < 1_000_000_000
        {
            timesRun?.intervals.append(fleetTime - timesRunLast)
        } else {
            try writeFrameTimes()
            timesRun = FrameTimesEntry(sequence: sequence, fleetTime: fleetTime)
        }
        timesRunLast = fleetTime
        if segment?.frames == 0 || expected != sequence || fleetTime - (marked?.fleetTime ?? 0) >= 1_000_000_000 {
            let marker = SequenceMarker(sequence: sequence, fleetTime: fleetTime, dropped: ledger.dropped.since(marked?.dropped ?? DropTally()))
            try writer.appendMetadata(marker.json, at: sinceStart, duration: 1_000_000)
            marked = (sequence, fleetTime, ledger.dropped)
            segmentFramesSinceMark = 0
        }
        // The framing crop at the top of each segment where there is one, and wherever it changes.
        let crop = FramingEntry.rounded(framing)
        if segment?.frames == 0 { framingNoted = nil }
        if (framingNoted == nil && crop != nil) || (framingNoted.map { $0.crop != crop || $0.optical != framingOptical } ?? false) {
            try writer.appendMetadata(
                FramingEntry(sequence: sequence, fleetTime: fleetTime, crop: crop, optical: framingOptical && crop != nil).json, at: sinceStart,
                duration: 1_000_000)
            framingNoted = (crop, framingOptical)
        }
        let duration = format.frameRate > 0 ? UInt64(1e9 / format.frameRate) : 0
        try writer.appendFrame(payload, at: sinceStart, duration: duration, keyframe: keyFrame)
        segmentFramesSinceMark += 1
        payloadBytes += Int64(payload.count)
        segment?.frames += 1
        if segment?.firstFleetTime == nil {
            segment?.firstFleetTime = fleetTime
            segment?.firstSequence = sequence
        }
        segment?.lastFleetTime = fleetTime
        segment?.lastSequence = sequence
        return verdict
    }

    /// A timed-metadata entry (one JSON object) at `fleetTime`, into the current segment.
    public func note(_ json: String, at fleetTime: UInt64, track: MetadataTrack = .notes) throws(RecordingError) {
        let sinceStart = fleetTime >= ledger.start ? fleetTime - ledger.start : 0
        guard let writer else {
            pendingMetadata.append((json, sinceStart, track))
            return
        }
        try writer.appendMetadata(json, at: sinceStart, track: track)
    }

    /// The take ends at `fleetTime`: frames captured from then on are not its.
    public func stop(at fleetTime: UInt64) { ledger.stop(at: fleetTime) }

    /// The part's end arrived with the take's drops as the device counted them at the end:
    /// those after the last frame held count too (`TakeFrameLedger.end`). Before `finish`,
    /// so the last segment's index entry says them.
    public func ended(cumulativeDrops: DropTally) { ledger.end(cumulativeDrops: cumulativeDrops) }

    /// Blocks until the SHA-256 of every segment finished so far is in the index (the hasher
    /// computes them on its own thread); throws the first that could not be made or indexed.
    public func waitForChecksums() throws(RecordingError) {
        try checksums.wait()
    }

    /// Finishes the open segment; the recorder can go on with a new one afterwards.
    @discardableResult
    public func finish() throws(RecordingError) -> TakeFrameLedger {
        try finishSegment()
        return ledger
    }

    private func openSegment(format: RecordedVideoFormat, slot: UInt64) throws(RecordingError) {
        var built = ""
        for component in directory.split(separator: "/", omittingEmptySubsequences: true) {
            built += "/" + component
            if mkdir(built, 0o755) != 0, errno != EEXIST {
                throw .system(doing: "cannot create \(built) for \(deviceID)'s segments", SystemCallError(call: "mkdir", target: built, errno: errno))
            }
        }
        segmentCount += 1
        let path = directory + "/" + deviceID + "-" + Self.fourDigits(segmentCount) + ".mkv"
        try index.segmentOpened(SegmentOpening(takeID: takeID, deviceID: deviceID, number: segmentCount, path: path))
        let opened = try MatroskaSegmentWriter(path: path, format: format, title: title)
        writer = opened
        settingsNoted = false
        segmentSlot = slot
        segment = FinishedSegment(
            takeID: takeID, deviceID: deviceID, number: segmentCount, path: path, sizeBytes: 0, sha256: "",
            frames: 0, format: format)
        let pending = pendingMetadata
        pendingMetadata = []
        for entry in pending { try opened.appendMetadata(entry.json, at: entry.at, track: entry.track) }
    }

    /// A segment number as four digits at least: 0001.
    private static func fourDigits(_ number: Int) -> String {
        let digits = String(number)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// Writes the run of exact frame times so far, at its last frame's time.
    private func writeFrameTimes() throws(RecordingError) {
        guard let run = timesRun, let writer else { return }
        timesRun = nil
        try writer.appendMetadata(run.json, at: timesRunLast >= ledger.start ? timesRunLast - ledger.start : 0, duration: 1_000_000)
    }

    private func finishSegment() throws(RecordingError) {
        try writeFrameTimes()
        guard let open = writer, var finished = segment else { return }
        writer = nil
        segment = nil
        try open.finish()
        var status = stat()
        do { try systemCall("stat", on: finished.path) { stat(finished.path, &status) } } catch {
            throw .system(doing: "cannot read the size of \(finished.path)", error)
        }
        finished.sizeBytes = Int64(status.st_size)
        guard let hasher else {
            finished.sha256 = try SegmentDigest.sha256(ofFile: finished.path)
            try index.segmentFinished(finished, ledger: ledger, payloadBytes: payloadBytes)
            return
        }
        try index.segmentFinished(finished, ledger: ledger, payloadBytes: payloadBytes)
        let index = self.index, indexed = finished, checksums = self.checksums
        checksums.handedOver()
        hasher.checksum(finished.path) { result in
            do throws(RecordingError) {
                try index.segmentChecksummed(indexed, sha256: try result.get())
                checksums.settled(nil)
            } catch {
                checksums.settled(error)
            }
        }
    }
}
