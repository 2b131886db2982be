import CAVFormat
import FleetCore
import Glibc

/// What an index (the coordinator's database, an agent's manifest) says of a segment: what
/// its file is checked against.
public struct IndexedSegment: Sendable, Equatable {
    public var deviceID: String
    public var number: Int
    public var path: String
    /// Still being written, or not repaired yet after a crash: there is nothing to check.
    public var isOpen: Bool
    public var sizeBytes: Int64
    /// Empty until it is computed.
    public var sha256: String
    public var frames: Int64
    public var firstFleetNs: UInt64?
    public var lastFleetNs: UInt64?
    public var firstSequence: UInt64?
    public var lastSequence: UInt64?

    public init(
        deviceID: String, number: Int, path: String, isOpen: Bool = false, sizeBytes: Int64, sha256: String, frames: Int64,
        firstFleetNs: UInt64?, lastFleetNs: UInt64?, firstSequence: UInt64?, lastSequence: UInt64?
    ) {
        self.deviceID = deviceID
        self.number = number
        self.path = path
        self.isOpen = isOpen
        self.sizeBytes = sizeBytes
        self.sha256 = sha256
        self.frames = frames
        self.firstFleetNs = firstFleetNs
        self.lastFleetNs = lastFleetNs
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
    }
}

/// Checks a segment's file against what the index says of it: size and SHA-256, that
/// libavformat (what ffprobe reads with) finds as many video frames as the index counts, at
/// the index's first and last timestamps, and that the file's sequence markers give its
/// frames the index's sequence range, every gap explained by the drops the markers report.
/// Blocking disk I/O: call it on a thread you own.
public enum SegmentVerifier {
    public struct Report: Sendable, Equatable {
        public var problems: [String] = []
        public var frames = 0
        public var sizeBytes: Int64 = 0
        public var ok: Bool { problems.isEmpty }
    }

    public static func verify(_ segment: IndexedSegment, takeStart: UInt64) -> Report {
        var report = Report()
        let name = "segment \(segment.number) of \(segment.deviceID)"
        var status = stat()
        guard stat(segment.path, &status) == 0 else {
            report.problems.append("\(name): its file \(segment.path) is missing (\(String(cString: strerror(errno))))")
            return report
        }
        report.sizeBytes = Int64(status.st_size)
        if segment.isOpen {
            report.problems.append("\(name) is still open: it is being written, or the coordinator has not repaired it yet")
            return report
        }
        if report.sizeBytes != segment.sizeBytes {
            report.problems.append("\(name): the file has \(report.sizeBytes) bytes, the index says \(segment.sizeBytes)")
        }
        do throws(RecordingError) {
            let digest = try SegmentDigest.sha256(ofFile: segment.path)
            if segment.sha256.isEmpty {
                report.problems.append("\(name) has no checksum in the index yet (it is being computed, or the coordinator restarts to compute it)")
            } else if digest != segment.sha256 {
                report.problems.append("\(name): SHA-256 \(digest) differs from the index's \(segment.sha256)")
            }
        } catch {
            report.problems.append("\(name): cannot checksum: \(error)")
        }
        let contents: Contents
        do throws(RecordingError) {
            contents = try read(segment.path)
        } catch {
            report.problems.append("\(name): cannot read it as Matroska: \(error)")
            return report
        }
        report.frames = contents.frames.count
        if Int64(contents.frames.count) != segment.frames {
            report.problems.append("\(name): the file holds \(contents.frames.count) video frames, the index says \(segment.frames)")
        }
        // Matroska keeps milliseconds; the index nanoseconds.
        func milliseconds(_ fleet: UInt64?) -> Int64? { fleet.map { Int64((Double($0 &- takeStart) / 1e6).rounded()) } }
        if let first = contents.frames.first?.milliseconds, let expected = milliseconds(segment.firstFleetNs), abs(first - expected) > 1 {
            report.problems.append("\(name): its first frame is at \(first) ms, the index says \(expected) ms")
        }
        if let last = contents.frames.last?.milliseconds, let expected = milliseconds(segment.lastFleetNs), abs(last - expected) > 1 {
            report.problems.append("\(name): its last frame is at \(last) ms, the index says \(expected) ms")
        }
        if zip(contents.frames, contents.frames.dropFirst()).contains(where: { $0.milliseconds > $1.milliseconds }) {
            report.problems.append("\(name): its frames' timestamps go backwards")
        }
        // Sequences, from the markers.
        let sequences = contents.frames.map(\.sequence)
        if sequences.contains(where: { $0 == nil }), !sequences.isEmpty {
            report.problems.append("\(name): frames before any sequence marker: the file does not say which frames they are")
        } else if let first = sequences.first ?? nil, let last = sequences.last ?? nil {
            if first != segment.firstSequence || last != segment.lastSequence {
                report.problems.append(
                    "\(name): its frames are \(first)…\(last), the index says \(segment.firstSequence.map(String.init) ?? "none")…\(segment.lastSequence.map(String.init) ?? "none")"
                )
            }
            var gaps: UInt64 = 0
            for (earlier, later) in zip(sequences, sequences.dropFirst()) {
                guard let earlier, let later else { continue }
                if later <= earlier {
                    report.problems.append("\(name): frame \(later) follows \(earlier): sequences must rise")
                } else {
                    gaps += later - earlier - 1
                }
            }
            if gaps != contents.reportedDrops {
                report.problems.append(
                    "\(name): \(gaps) frames are missing between its first and last, its markers account for \(contents.reportedDrops)")
            }
        }
        return report
    }

    private struct Frame {
        var milliseconds: Int64
        var sequence: UInt64?
    }

    private struct Contents {
        var frames: [Frame] = []
        /// Drops the markers after the first frame report: the gaps inside the file.
        var reportedDrops: UInt64 = 0
    }

    private static func read(_ path: String) throws(RecordingError) -> Contents {
        var contents = Contents()
        var nextSequence: UInt64?
        try SegmentPackets.read(path) { packet in
            switch packet {
            case let .video(nanoseconds):
                // Matroska counts milliseconds: the division is exact.
                contents.frames.append(Frame(milliseconds: nanoseconds / 1_000_000, sequence: nextSequence))
                nextSequence = nextSequence.map { $0 + 1 }
            case let .metadata(json):
                guard let marker = SequenceMarker(json: json) else { return }
                if !contents.frames.isEmpty { contents.reportedDrops += marker.dropped.total }
                nextSequence = marker.sequence
            }
        }
        return contents
    }
}
