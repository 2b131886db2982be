import Foundation

/// A file fetched from the coordinator a chunk at a time, written as it comes: the one loop
/// behind backups and exports.
enum ChunkedDownload {
    /// One answer: the bytes at the offset asked for, and the whole file's size.
    struct Chunk {
        var bytes: Data
        var total: UInt64
    }

    /// Creates (or empties) `path`, then asks `fetch` for the chunk at each offset and appends
    /// it, until a chunk comes back empty or the whole file is there. Returns the bytes written.
    /// `advanced` hears the offset after every chunk. The file is closed whatever happens.
    static func write(
        to path: String, cannotCreateHint: String, fetch: (_ offset: UInt64) throws -> Chunk,
        advanced: (UInt64) -> Void
    ) throws -> UInt64 {
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            throw TransferError.cannotCreate(path: path, hint: cannotCreateHint)
        }
        var offset: UInt64 = 0
        do {
            while true {
                let chunk = try fetch(offset)
                if !chunk.bytes.isEmpty { try handle.write(contentsOf: chunk.bytes) }
                offset += UInt64(chunk.bytes.count)
                advanced(offset)
                if chunk.bytes.isEmpty || offset >= chunk.total { break }
            }
        } catch {
            // The failure that stopped the download is the one to report; closing a file
            // that is given up on cannot lose anything more.
            try? handle.close()
            throw error
        }
        // close(2) is where a delayed write error shows: thrown, never ignored.
        try handle.close()
        return offset
    }
}
