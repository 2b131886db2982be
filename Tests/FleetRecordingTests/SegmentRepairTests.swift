import FleetCore
import FleetRecording
import Foundation
import Testing

/// A crash mid-segment leaves on disk exactly what the writer had written so far: these
/// tests copy the file at that moment (and cut it mid-frame, as a half-done write would),
/// repair the copy and read it back with ffprobe.
final class SegmentRepairTests {
    let scratch: ScratchDirectory
    var directory: String { scratch.path }

    init() throws { scratch = try ScratchDirectory("capfleet-repair") }

    let interval: UInt64 = 33_333_333

    /// Writes `frames` frames and one metadata entry, and returns the writer still open.
    func unfinishedSegment(at path: String, frames: Int) throws -> MatroskaSegmentWriter {
        let writer = try MatroskaSegmentWriter(
            path: path, format: RecordedVideoFormat(pixelFormat: .yuyv, width: 64, height: 48, frameRate: 30), title: "crash")
        var frame = [UInt8](repeating: 0x80, count: 64 * 48 * 2)
        for index in 0..<frames {
            frame[0] = UInt8(truncatingIfNeeded: index)
            try frame.withUnsafeBytes { try writer.appendFrame($0, at: UInt64(index) * interval, duration: interval) }
            if index == 5 { try writer.appendMetadata(#"{"kind":"consent","state":"authorized"}"#, at: UInt64(index) * interval) }
        }
        return writer
    }

    @Test func aSegmentCutOffByACrash_playsAfterRepair_withEveryWholeFrameAtItsTime() throws {
        let path = directory + "/live.mkv"
        let writer = try unfinishedSegment(at: path, frames: 100)
        let crashed = directory + "/crashed.mkv"
        try FileManager.default.copyItem(atPath: path, toPath: crashed)
        _ = writer

        let outcome = try SegmentRepair.repair(path: crashed)
        // Clusters hold a second (30 frames): the first two are surely on disk, the frames
        // still in the muxer's memory are not.
        #expect(outcome.frames >= 60 && outcome.frames < 100, "\(outcome)")
        #expect(outcome.metadataEntries == 1)
        #expect(outcome.firstTimestamp == 0)
        #expect(outcome.lastTimestamp.map { abs(Int64($0) - Int64(UInt64(outcome.frames - 1) * interval)) <= 500_000 } == true)

        let counted = try MatroskaSegmentWriterTests.probe([
            "-count_frames", "-select_streams", "v", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", crashed,
        ])
        #expect(Int(counted.trimmingCharacters(in: .whitespacesAndNewlines)) == outcome.frames)
        let duration = try MatroskaSegmentWriterTests.probe(["-show_entries", "format=duration", "-of", "csv=p=0", crashed])
        #expect(Double(duration.trimmingCharacters(in: .whitespacesAndNewlines)) != nil, "a finished file knows its duration: \(duration)")
        #expect(!FileManager.default.fileExists(atPath: crashed + ".repair"))
    }

    @Test func aFrameHalfWritten_isLeftOut_andTheRestIsKept() throws {
        let path = directory + "/live.mkv"
        let writer = try unfinishedSegment(at: path, frames: 100)
        let cut = directory + "/cut.mkv"
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        // Cut through the middle of a frame in the last cluster on disk.
        try bytes.prefix(bytes.count - 64 * 48).write(to: URL(fileURLWithPath: cut))
        _ = writer

        let outcome = try SegmentRepair.repair(path: cut)
        #expect(outcome.frames >= 30, "\(outcome)")
        let counted = try MatroskaSegmentWriterTests.probe([
            "-count_frames", "-select_streams", "v", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", cut,
        ])
        #expect(Int(counted.trimmingCharacters(in: .whitespacesAndNewlines)) == outcome.frames, "every frame left decodes")
        let errors = try MatroskaSegmentWriterTests.run("/usr/bin/ffmpeg", ["-v", "error", "-i", cut, "-map", "0:v", "-f", "null", "-"])
        #expect(errors.isEmpty, "ffmpeg decodes the repaired file without complaint: \(errors)")
    }

    @Test func aFileThatIsNoSegment_isAClearError() throws {
        let path = directory + "/junk.mkv"
        try Data("not a matroska file".utf8).write(to: URL(fileURLWithPath: path))
        #expect {
            _ = try SegmentRepair.repair(path: path)
        } throws: { error in
            "\(error)".contains("cannot read the unfinished segment") && "\(error)".contains(path)
        }
    }
}
