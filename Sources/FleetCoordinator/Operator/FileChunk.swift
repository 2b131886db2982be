import FleetProtocol
import FleetSystem
import Foundation

/// Files read in chunks into a reply: exports of takes and stills.
enum FileChunk {
    /// Up to `length` bytes (at most 1 MiB; 0 = 1 MiB) of a file from `offset`, read on a thread
    /// of its own, into the reply's segment_data with the whole file's size: exports of takes and stills.
    static func read(of path: String, offset: UInt64, length wanted: UInt32, into reply: inout Capfleet_V1_OperatorReply) async {
        let length = Int(wanted == 0 ? 1 << 20 : min(wanted, 1 << 20))
        let read = await OwnedThread.run("cf-files") { () -> Result<(Data, UInt64), CocoaError> in
            guard let handle = FileHandle(forReadingAtPath: path) else { return .failure(CocoaError(.fileReadNoSuchFile)) }
            // Closing a file opened for reading cannot lose data.
            defer { try? handle.close() }
            do {
                let size = try handle.seekToEnd()
                try handle.seek(toOffset: min(offset, size))
                return .success((try handle.read(upToCount: length) ?? Data(), size))
            } catch {
                return .failure(CocoaError(.fileReadUnknown))
            }
        }
        switch read {
        case let .success((data, size)):
            reply.segmentData = data
            reply.segmentSize = size
            reply.status = .ok
        case let .failure(error):
            reply.status = .failure(.internal, "cannot read \(path): \(error.localizedDescription)")
        }
    }
}
