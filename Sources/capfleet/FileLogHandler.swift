import FleetSystem
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// swift-log lines appended to a file, as StreamLogHandler writes them to a terminal: what
/// `capfleet dev` does with its daemons' logs, so that its terminal shows its summary and
/// what it says at Ctrl-C, not the daemons' chatter. One write(2) per line, on an O_APPEND
/// descriptor, so lines from many threads never interleave.
struct FileLogHandler: LogHandler {
    let label: String
    let descriptor: Int32
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    /// Opens (creating, appending to) `path`; throws a failure that names it.
    static func open(_ path: String) throws -> Int32 {
        let descriptor = Glibc.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw CLIFailure("cannot write the log file \(path): \(String(cString: strerror(errno)))") }
        return descriptor
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(
        level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?, source: String,
        file: String, function: String, line: UInt
    ) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { $1 } }
        if let explicit { all.merge(explicit) { $1 } }
        let fields = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let stamp = Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        let text = "\(stamp) \(level) \(label) :\(fields.isEmpty ? "" : " " + fields) [\(source)] \(message)\n"
        // A full disk loses log lines, never the fleet: the failure is dropped on purpose.
        do {
            try FileDescriptorIO.writeAll(descriptor, Array(text.utf8), target: "the log file")
        } catch {}
    }
}
