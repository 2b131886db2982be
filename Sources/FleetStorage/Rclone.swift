import Foundation
import Synchronization

/// Debian's rclone, run for one destination: each call blocks until rclone exits, so callers
/// run it on a thread they own (an upload takes as long as its bytes at the rate limit). The
/// destination reaches rclone through its environment, never its arguments, so secrets do not
/// show in `ps`; no configuration file of the user's is read.
public struct Rclone: Sendable {
    /// rclone's name for the destination in this process's environment.
    static let remote = "cfstore"

    public let destination: StorageDestination
    let executable: String
    let environment: [String: String]
    /// Asked while rclone runs: true ends it (the host is stopping), and the call throws.
    public var stopRequested: @Sendable () -> Bool = { false }
    /// Whether the destination keeps SHA-256 checksums, once it has said: a store that keeps
    /// none is not asked again for every object (a process each). Shared by copies of this value.
    private let keepsSHA256 = KeptChecksums()

    private final class KeptChecksums: Sendable {
        /// 0: not known yet, 1: kept, 2: not kept.
        let state = Atomic<UInt8>(0)
    }

    /// Finds rclone on PATH and obscures the destination's passwords with it.
    public init(destination: StorageDestination, path: String? = nil) throws(RcloneError) {
        let search = path ?? ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        guard let found = search.split(separator: ":").map({ "\($0)/rclone" }).first(where: FileManager.default.isExecutableFile(atPath:)) else {
            throw .missing
        }
        executable = found
        self.destination = destination
        var obscured: [String: String] = [:]
        let bare = Rclone(executable: found, destination: destination, environment: [:])
        for (key, value) in destination.secrets where StorageDestination.obscuredKeys.contains(key) {
            obscured[key] = try bare.run(["obscure", "-"], input: value, for: "obscure \(key)").output
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        var environment = destination.environment(remote: Self.remote, obscured: obscured)
        // No configuration file at all: not the user's ~/.config/rclone to read, and none to
        // write (rclone's SFTP saves what it learns of the server's shell into its file).
        environment["RCLONE_CONFIG"] = ""
        self.environment = environment
    }

    private init(executable: String, destination: StorageDestination, environment: [String: String]) {
        self.executable = executable
        self.destination = destination
        self.environment = environment
    }

    /// `remote:path` for a path on the destination.
    func object(_ path: String) -> String { "\(Self.remote):\(path)" }

    /// The destination's name for rclone run with `processEnvironment`.
    public var remoteName: String { Self.remote }

    /// The environment rclone runs in for this destination: this process's, without any
    /// RCLONE_ setting of its own, and the destination's.
    public var processEnvironment: [String: String] {
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("RCLONE_") }
        environment.merge(self.environment) { $1 }
        return environment
    }

    /// The object's size, nil when the destination holds no such object.
    public func size(of path: String) throws(RcloneError) -> UInt64? {
        let result = try run(["lsjson", "--stat", object(path)], for: "look up \(path)", allowing: [3, 4])
        guard result.status == 0 else { return nil }
        guard let parsed = try? JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any],
            let size = (parsed["Size"] as? NSNumber)?.int64Value, size >= 0
        else {
            throw .unreadable(operation: "look up \(path)", output: result.output)
        }
        return UInt64(size)
    }

    /// Sends a local file to `path`, at most `bytesPerSecond` (0: no limit); `progress` hears
    /// the bytes sent so far about every two seconds.
    public func upload(_ file: String, to path: String, bytesPerSecond: UInt64, progress: ((UInt64) -> Void)? = nil) throws(RcloneError) {
        var arguments = ["copyto", file, object(path), "--retries", "3", "--low-level-retries", "10"]
        if bytesPerSecond > 0 { arguments += ["--bwlimit", "\(max(1, bytesPerSecond / 1024))k"] }
        _ = try run(arguments, for: "send \(file) to \(path)", progress: progress)
    }

    /// The bytes free on the destination as it tells them (SFTP's statvfs, S3 and others say
    /// nothing: nil).
    public func freeBytes() throws(RcloneError) -> UInt64? {
        let result = try run(["about", "--json", object("")], for: "ask the destination's free space", allowing: [1])
        guard result.status == 0, let parsed = try? JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any],
            let free = (parsed["free"] as? NSNumber)?.int64Value, free >= 0
        else { return nil }
        return UInt64(free)
    }

    /// Writes small files (name and bytes) into `folder` in one rclone run: the take's index
    /// and sync report.
    public func write(_ files: [(name: String, data: Data)], into folder: String) throws(RcloneError) {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-index-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        do {
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: false)
            for file in files { try file.data.write(to: scratch.appendingPathComponent(file.name)) }
        } catch {
            throw .couldNotRun(operation: "write \(folder)", reason: "\(error)")
        }
        // --ignore-times: a new index of the same size replaces the old one.
        _ = try run(["copy", "--ignore-times", scratch.path, object(folder)], for: "write \(files.map(\.name).joined(separator: ", ")) to \(folder)")
    }

    /// The destination's own SHA-256 of the object, nil when it keeps none.
    public func storeChecksum(of path: String) throws(RcloneError) -> String? {
        if keepsSHA256.state.load(ordering: .relaxed) == 2 { return nil }
        let result = try run(["hashsum", "sha256", object(path)], for: "ask the checksum of \(path)", allowing: [1])
        if result.status != 0 {
            guard result.errors.contains("hash type not supported") || result.errors.contains("hash unsupported") else {
                throw RcloneError.failed(operation: "ask the checksum of \(path)", status: result.status, said: result.errors)
            }
            keepsSHA256.state.store(2, ordering: .relaxed)
            return nil
        }
        keepsSHA256.state.store(1, ordering: .relaxed)
        return try Self.firstHash(result.output, operation: "ask the checksum of \(path)")
    }

    /// Reads the object back and returns the SHA-256 of what arrived.
    public func readBackChecksum(of path: String) throws(RcloneError) -> String {
        let result = try run(["hashsum", "sha256", "--download", object(path)], for: "read back \(path)")
        return try Self.firstHash(result.output, operation: "read back \(path)")
    }

    /// Copies the object to a local file.
    public func download(_ path: String, to file: String) throws(RcloneError) {
        _ = try run(["copyto", object(path), file], for: "read \(path)")
    }

    public func remove(_ path: String) throws(RcloneError) {
        _ = try run(["deletefile", object(path)], for: "remove \(path)")
    }

    private static func firstHash(_ output: String, operation: String) throws(RcloneError) -> String {
        guard let hash = output.split(separator: " ").first.map(String.init), hash.count == 64, hash.allSatisfy(\.isHexDigit) else {
            throw .unreadable(operation: operation, output: output)
        }
        return hash.lowercased()
    }

    struct Result {
        let status: Int32
        let output: String
        let errors: String
    }

    /// Runs rclone; a status outside 0 and `allowing` throws with what it printed. With
    /// `progress`, rclone logs JSON with its transfer statistics, read as it runs.
    private func run(
        _ arguments: [String], input: String? = nil, for operation: String, allowing: Set<Int32> = [], progress: ((UInt64) -> Void)? = nil
    ) throws(RcloneError) -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = (progress == nil ? ["-q"] : ["-v", "--use-json-log", "--stats", "2s"]) + arguments
        process.environment = processEnvironment
        // Both streams to files: a pipe not drained while the other is read can stall rclone.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-rclone-\(UUID().uuidString)")
        do {
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: false)
        } catch {
            throw .couldNotRun(operation: operation, reason: "\(error)")
        }
        defer { try? FileManager.default.removeItem(at: scratch) }
        let outputURL = scratch.appendingPathComponent("out"), errorsURL = scratch.appendingPathComponent("err")
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errorsURL.path, contents: nil)
        let stdin = Pipe()
        // Woken the moment rclone exits (a poll's sleep after each of a segment's four steps
        // was a fifth of its time), and every 200 ms meanwhile for a stop and the progress.
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        do {
            process.standardOutput = try FileHandle(forWritingTo: outputURL)
            process.standardError = try FileHandle(forWritingTo: errorsURL)
            process.standardInput = input == nil ? FileHandle.nullDevice : stdin
            try process.run()
            if let input {
                try stdin.fileHandleForWriting.write(contentsOf: Data(input.utf8))
                try stdin.fileHandleForWriting.close()
            }
        } catch {
            throw .couldNotRun(operation: operation, reason: "\(error)")
        }
        var stopped = false
        while exited.wait(timeout: .now() + .milliseconds(200)) == .timedOut {
            if !stopped, stopRequested() {
                stopped = true
                process.terminate()
            }
            if let progress, let sent = Self.bytesSent(inLog: errorsURL.path) { progress(sent) }
        }
        process.waitUntilExit()
        if stopped { throw .stopped(operation: operation) }
        let output = (try? String(contentsOf: outputURL, encoding: .utf8)) ?? ""
        var errors = ((try? String(contentsOf: errorsURL, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        if progress != nil { errors = Self.errorMessages(inLog: errors) }
        let status = process.terminationStatus
        guard status == 0 || allowing.contains(status) else {
            throw RcloneError.failed(operation: operation, status: status, said: errors)
        }
        return Result(status: status, output: output, errors: errors)
    }

    /// The bytes transferred in the last statistics line of rclone's JSON log.
    static func bytesSent(inLog path: String) -> UInt64? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        // The statistics lines are a few kilobytes; the last one is near the end.
        let size = (try? handle.seekToEnd()) ?? 0
        try? handle.seek(toOffset: size > 16_384 ? size - 16_384 : 0)
        guard let data = try? handle.readToEnd() else { return nil }
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n").reversed() where line.contains("\"stats\"") {
            if let parsed = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let stats = parsed["stats"] as? [String: Any], let bytes = (stats["bytes"] as? NSNumber)?.int64Value
            {
                return UInt64(max(bytes, 0))
            }
        }
        return nil
    }

    /// The messages of a JSON log's error lines (what rclone said went wrong).
    static func errorMessages(inLog log: String) -> String {
        log.split(separator: "\n").compactMap { line -> String? in
            guard let parsed = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                (parsed["level"] as? String) == "error" || (parsed["level"] as? String) == "critical"
            else { return nil }
            return (parsed["msg"] as? String)?.trimmingCharacters(in: .whitespacesAndNewlines)
        }.joined(separator: "\n")
    }
}

/// Why rclone could not do what it was asked, and what to do.
public enum RcloneError: Error, Equatable, CustomStringConvertible {
    case missing
    case couldNotRun(operation: String, reason: String)
    case failed(operation: String, status: Int32, said: String)
    case unreadable(operation: String, output: String)
    /// Ended because the host is stopping; the coordinator orders it again.
    case stopped(operation: String)

    /// The destination said it has no room (WebDAV's 507, a full disk, a quota).
    public var destinationFull: Bool {
        guard case .failed(_, _, let said) = self else { return false }
        let lowered = said.lowercased()
        return ["insufficient storage", "507 ", "no space left", "quota", "disk full", "storage full", "enospc"].contains { lowered.contains($0) }
    }

    public var description: String {
        switch self {
        case .missing:
            "rclone is not installed on this host: offloading takes needs it (apt-get install rclone)"
        case .couldNotRun(let operation, let reason):
            "could not run rclone to \(operation): \(reason)"
        case .failed(let operation, let status, let said):
            "rclone could not \(operation) (exit \(status))"
                + (destinationFull ? ", the destination is full" : "")
                + ": \(said.split(separator: "\n").suffix(3).joined(separator: "; "))"
        case .unreadable(let operation, let output):
            "rclone's answer to \(operation) is not what it should be: \(output.prefix(200))"
        case .stopped(let operation):
            "rclone was stopped before it could \(operation): this host is stopping, and the copy goes on when it is back"
        }
    }
}
