import FleetRecording
import Foundation
import Testing

/// Collect's checksum made as the copy is written: the same as reading the whole file back,
/// whether it starts from nothing or from the part an earlier collect wrote.
@Suite struct RunningDigestTests {
    @Test func chunksInOrder_andAPrefixReadFromTheFile_giveTheFilesSHA256() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-digest-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let bytes = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let whole = try SegmentDigest.sha256(ofFile: path)

        let streamed = try RunningDigest()
        for start in stride(from: 0, to: bytes.count, by: 1 << 20) {
            try bytes[start..<min(start + (1 << 20), bytes.count)].withUnsafeBytes { try streamed.update($0) }
        }
        #expect(streamed.bytes == 3_000_000)
        #expect(try streamed.finish() == whole)

        let resumed = try RunningDigest()
        try resumed.update(fromFile: path, length: 1_234_567)
        try bytes[1_234_567...].withUnsafeBytes { try resumed.update($0) }
        #expect(try resumed.finish() == whole)
    }
}
